// The operator console (README.md, Operator console): one page, views in the #fragment (#/overview, #/sessions,
// #/sessions/<id>, #/webhooks), so the service serves a single HTML document. Login is the
// dashboard login of contract 4.1; every role sees every page, only OWNER and ADMIN get actions.
import 'uplot/dist/uPlot.min.css'
import './style.css'
import { html, render } from 'htm/preact'
import { useEffect, useState } from 'preact/hooks'
import { login, logout, session, whenLoggedOut, type Login, type MasklineError } from './api.js'
import { onStatus, startLive, stopLive } from './live.js'
import { OverviewPage } from './overview.js'
import { SessionsPage } from './sessions.js'
import { WebhooksPage } from './webhooks.js'
import { TwilioProxyPage } from './twilio-proxy.js'

function useHash(): string {
  const [hash, setHash] = useState(location.hash)
  useEffect(() => {
    const on = () => setHash(location.hash)
    addEventListener('hashchange', on)
    return () => removeEventListener('hashchange', on)
  }, [])
  return hash
}

function LoginForm(props: { onLogin: (l: Login) => void }) {
  const [email, setEmail] = useState('')
  const [password, setPassword] = useState('')
  const [error, setError] = useState<string | null>(null)
  const [busy, setBusy] = useState(false)
  const submit = (e: Event) => {
    e.preventDefault()
    setBusy(true)
    setError(null)
    login(email, password).then(
      l => { setPassword(''); props.onLogin(l) },
      (err: MasklineError) => setError(err.status === 401 ? 'Wrong email or password' : err.status === 429 ? 'Too many attempts; wait a minute' : err.message),
    ).finally(() => setBusy(false))
  }
  return html`
    <main class="login">
      <form id="login-form" class="card" onSubmit=${submit}>
        <h1>maskline console</h1>
        <label>Email <input id="login-email" type="email" autocomplete="username" required value=${email} onInput=${(e: Event) => setEmail((e.target as HTMLInputElement).value)} /></label>
        <label>Password <input id="login-password" type="password" autocomplete="current-password" required value=${password} onInput=${(e: Event) => setPassword((e.target as HTMLInputElement).value)} /></label>
        ${error ? html`<p class="error" id="login-error">${error}</p>` : null}
        <button id="login-submit" disabled=${busy}>Log in</button>
      </form>
    </main>`
}

function LiveDot() {
  const [up, setUp] = useState(false)
  useEffect(() => onStatus(setUp), [])
  return html`<span id="live-status" class=${`live ${up ? 'up' : 'down'}`} title=${up ? 'Live: connected to the event stream' : 'Reconnecting to the event stream'}>${up ? 'live' : 'offline'}</span>`
}

function App() {
  const [who, setWho] = useState<Login | null>(session())
  const hash = useHash()
  useEffect(() => whenLoggedOut(() => { stopLive(); setWho(null) }), [])
  useEffect(() => { if (who) startLive() }, [who])
  if (!who) return html`<${LoginForm} onLogin=${setWho} />`

  const [, page = 'overview', id = null] = hash.split('/')
  const nav = (name: string, label: string) => html`<a href=${`#/${name}`} class=${page === name ? 'active' : ''} id=${`nav-${name}`}>${label}</a>`
  return html`
    <header>
      <strong>maskline</strong>
      <nav>${nav('overview', 'Overview')}${nav('sessions', 'Sessions')}${nav('webhooks', 'Webhooks')}${nav('twilio', 'Twilio Proxy')}</nav>
      <span class="who"><${LiveDot} /> ${who.tenant.name} · <span id="user-role">${who.user.role}</span>
        <button class="link" id="logout" onClick=${logout}>Log out</button></span>
    </header>
    <main id=${`page-${page}`}>
      ${page === 'sessions' ? html`<${SessionsPage} id=${id} />` : page === 'webhooks' ? html`<${WebhooksPage} />` : page === 'twilio' ? html`<${TwilioProxyPage} />` : html`<${OverviewPage} />`}
    </main>`
}

render(html`<${App} />`, document.getElementById('app')!)
