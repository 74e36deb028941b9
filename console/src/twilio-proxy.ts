// Twilio Proxy: the OWNER obtains the façade's credentials (docs/twilio-proxy.md). The auth token
// is shown once, in this page only, right after it is issued; it is never fetched again.
import { html } from 'htm/preact'
import { useEffect, useState } from 'preact/hooks'
import { api, session as login, type MasklineError } from './api.js'

interface Issued { accountSid: string; authToken: string; baseUrl: string }

export function TwilioProxyPage() {
  const owner = login()?.user.role === 'OWNER'
  const [sid, setSid] = useState<string | null>(null)
  const [base, setBase] = useState<string>('')
  const [issued, setIssued] = useState<Issued | null>(null)
  const [error, setError] = useState<string | null>(null)
  useEffect(() => {
    if (owner) api(c => c.twilioProxy.get()).then(v => { setSid(v.accountSid); setBase(v.baseUrl) }, (e: Error) => setError(e.message))
  }, [])
  const issue = () => {
    setError(null)
    api(c => c.twilioProxy.issue()).then(v => { setIssued(v); setSid(v.accountSid) }, (e: MasklineError) => setError(e.message))
  }
  if (!owner) return html`<section class="card"><h2>Twilio Proxy</h2><p class="muted">Only the OWNER obtains the Twilio Proxy credentials.</p></section>`
  return html`
    <section class="card" id="twilio-proxy">
      <h2>Twilio Proxy</h2>
      <p>Code written for Twilio Proxy runs here with these credentials and <code>client.proxy.baseUrl = '${issued?.baseUrl ?? base}'</code>.</p>
      ${error ? html`<p class="error">${error}</p>` : null}
      <dl class="facts">
        <dt>Account SID</dt><dd id="twilio-account-sid">${sid ?? html`<span class="muted">none issued</span>`}</dd>
        <dt>Auth token</dt><dd id="twilio-auth-token">${issued ? html`<code>${issued.authToken}</code> <span class="muted">(shown once: copy it now)</span>` : html`<span class="muted">shown once, when issued</span>`}</dd>
      </dl>
      <button id="twilio-issue" onClick=${issue}>${sid ? 'Rotate the auth token' : 'Issue credentials'}</button>
    </section>`
}
