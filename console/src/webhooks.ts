// Webhooks: the configuration (URL and events; the signing secret is never shown), the delivery
// log with cursor paging, and "send test" for OWNER and ADMIN. Changing the configuration stays
// with the API (POST /v1/webhooks answers the new secret, which a page must not display).
import { html } from 'htm/preact'
import { useEffect, useState } from 'preact/hooks'
import { api, canAct, session as login, type MasklineError } from './api.js'
import { maskDigits, time } from './format.js'

interface Delivery { id: string; event: string; url: string; statusCode: number; success: boolean; attemptCount: number; error: string | null; requestedAt: string; completedAt: string }
interface Webhook { url: string | null; events: string[]; hasSecret: boolean }
interface Page<T> { data: T[]; pagination: { count: number; after: string | null } }

export function WebhooksPage() {
  const [cfg, setCfg] = useState<Webhook | null>(null)
  const [cursors, setCursors] = useState<Array<string | undefined>>([undefined])
  const [log, setLog] = useState<Page<Delivery> | null>(null)
  const [error, setError] = useState<string | null>(null)
  const [notice, setNotice] = useState<string | null>(null)
  const after = cursors[cursors.length - 1]

  const loadLog = () => {
    api<Page<Delivery>>(c => c.console.webhooks.logs({ limit: 25, ...(after ? { after } : {}) }).first()).then(setLog, (e: Error) => setError(e.message))
  }
  useEffect(() => { api<Webhook>(c => c.console.webhooks.list()).then(setCfg, (e: Error) => setError(e.message)) }, [])
  useEffect(() => {
    loadLog()
    const t = setInterval(loadLog, 15_000) // slow: it counts against the tenant's rate limit
    return () => clearInterval(t)
  }, [after])

  const sendTest = () => {
    setNotice(null)
    api(c => c.console.webhooks.test()).then(
      r => { setNotice(`Test event ${r.event.id} queued`); for (const ms of [1_000, 4_000]) setTimeout(loadLog, ms) }, // delivered within seconds
      (e: MasklineError) => setNotice(`Send test refused: ${e.message}`),
    )
  }

  return html`
    <section class="card" id="webhook-config">
      <h2>Webhook</h2>
      ${error ? html`<p class="error">${error}</p>` : null}
      ${cfg ? html`
        <dl class="facts">
          <dt>URL</dt><dd id="webhook-url">${cfg.url ?? html`<span class="muted">none configured</span>`}</dd>
          <dt>Events</dt><dd>${cfg.events.length ? cfg.events.join(', ') : '—'}</dd>
          <dt>Signing secret</dt><dd>${cfg.hasSecret ? 'set (shown once, when the webhook was registered)' : '—'}</dd>
        </dl>
        ${canAct(login()) ? html`<button id="send-test" disabled=${cfg.url === null} onClick=${sendTest}>Send test event</button>` : null}
        ${notice ? html`<p class="notice" id="webhook-notice">${notice}</p>` : null}` : html`<p class="muted">Loading…</p>`}
    </section>
    <section class="card">
      <h2>Delivery log</h2>
      <table id="delivery-log">
        <thead><tr><th>Requested</th><th>Event</th><th>Result</th><th>Attempt</th><th>Error</th></tr></thead>
        <tbody>${(log?.data ?? []).map(d => html`
          <tr class=${d.success ? '' : 'failed'}>
            <td>${time(d.requestedAt)}</td><td>${d.event}</td>
            <td><span class=${`badge ${d.success ? 'ok' : 'bad'}`}>${d.statusCode || 'no answer'}</span></td>
            <td>${d.attemptCount}</td><td>${d.error ? maskDigits(d.error) : ''}</td>
          </tr>`)}
        </tbody>
      </table>
      ${log && log.data.length === 0 ? html`<p class="muted">No deliveries yet.</p>` : null}
      <div class="pager">
        <button disabled=${cursors.length === 1} onClick=${() => setCursors(c => c.slice(0, -1))}>← Newer</button>
        <button disabled=${!log?.pagination.after} onClick=${() => setCursors(c => [...c, log!.pagination.after!])}>Older →</button>
      </div>
    </section>`
}
