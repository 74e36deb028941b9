// Sessions: the list (state filter, cursor paging) and one session's timeline, both kept current
// from the stream. OWNER and ADMIN may end a session, extend its grace period and swap party B
// (the /v1/console endpoints refuse the rest with 403 as well: the buttons are a convenience, the
// API is the rule). Parties are named by their role, never by number.
import { html } from 'htm/preact'
import { useEffect, useState } from 'preact/hooks'
import { api, canAct, session as login, type MasklineError } from './api.js'
import type { Maskline } from '../../sdk/src/client.js'
import type { SessionState } from '../../sdk/src/types.js'
import { duration, party, time } from './format.js'
import { onEvent, type EventEnvelope } from './live.js'

const STATES = ['', 'PENDING', 'ACTIVE', 'GRACE_PERIOD', 'EXPIRED', 'FAILED'] as const
const PAGE = 20
const EXTEND_MINUTES = 15
// The console's requests count against the tenant's per-minute limit (contract 8.1) like its API
// clients' do: a busy tenant's events are coalesced into at most one reload per interval.
const LIST_REFRESH_MS = 3_000
const DETAIL_REFRESH_MS = 250

interface SessionView {
  id: string; proxyNumber: string; state: string; directionMode: string; gracePeriodMinutes: number; maxDurationMinutes: number
  expiresAt: string; createdAt: string; activatedAt: string; endedAt: string | null; expiredAt: string | null; callCount: number; lastCallAt: string | null
}
interface Page<T> { data: T[]; pagination: { count: number; after: string | null } }
/** GET /v1/console/sessions/:id/timeline: built by the service from the session, call, SMS and audit tables. */
type TimelineEntry =
  | { kind: 'created' | 'activated' | 'swap' | 'ended' | 'expired' | 'failed'; at: string }
  | { kind: 'call'; at: string; id: string; direction: string; status: string; durationSeconds: number }
  | { kind: 'sms'; at: string; id: string; direction: string; status: string; reason: string | null }
interface Timeline { data: TimelineEntry[]; truncated: boolean }

/** Calls `fn` once, `ms` after an event that `match`es; the events until then ride along. */
function useEventRefresh(match: (e: EventEnvelope) => boolean, fn: () => void, ms: number, deps: unknown[]): void {
  useEffect(() => {
    let t: ReturnType<typeof setTimeout> | null = null
    const off = onEvent(e => {
      if (!match(e) || t) return
      t = setTimeout(() => { t = null; fn() }, ms)
    })
    return () => { off(); if (t) clearTimeout(t) }
  }, deps)
}

export function SessionsPage(props: { id: string | null }) {
  return props.id ? html`<${SessionDetail} id=${props.id} />` : html`<${SessionList} />`
}

function SessionList() {
  const [state, setState] = useState('')
  const [cursors, setCursors] = useState<Array<string | undefined>>([undefined])
  const [page, setPage] = useState<Page<SessionView> | null>(null)
  const [error, setError] = useState<string | null>(null)
  const after = cursors[cursors.length - 1]

  const load = () => {
    const query = { limit: PAGE, ...(state ? { state: state as SessionState } : {}), ...(after ? { after } : {}) }
    api<Page<SessionView>>(c => c.console.sessions.list(query).first()).then(p => { setPage(p); setError(null) }, (e: Error) => setError(e.message))
  }
  useEffect(load, [state, after])
  useEventRefresh(e => e.type.startsWith('session.') || e.type === 'call.incoming', load, LIST_REFRESH_MS, [state, after])

  return html`
    <section class="card">
      <div class="toolbar">
        <h2>Sessions</h2>
        <label>State <select id="state-filter" value=${state} onChange=${(e: Event) => { setState((e.target as HTMLSelectElement).value); setCursors([undefined]) }}>
          ${STATES.map(s => html`<option value=${s}>${s ? s.replace('_', ' ') : 'all'}</option>`)}
        </select></label>
      </div>
      ${error ? html`<p class="error">${error}</p>` : null}
      <table id="session-list">
        <thead><tr><th>Proxy number</th><th>State</th><th>Created</th><th>Expires</th><th>Calls</th></tr></thead>
        <tbody>
          ${(page?.data ?? []).map(s => html`
            <tr data-session=${s.id}>
              <td><a href=${`#/sessions/${s.id}`}>${s.proxyNumber}</a></td>
              <td><span class=${`badge state-${s.state}`}>${s.state.replace('_', ' ')}</span></td>
              <td>${time(s.createdAt)}</td><td>${time(s.expiresAt)}</td><td>${s.callCount}</td>
            </tr>`)}
        </tbody>
      </table>
      ${page && page.data.length === 0 ? html`<p class="muted">No sessions.</p>` : null}
      <div class="pager">
        <button id="prev-page" disabled=${cursors.length === 1} onClick=${() => setCursors(c => c.slice(0, -1))}>← Newer</button>
        <button id="next-page" disabled=${!page?.pagination.after} onClick=${() => setCursors(c => [...c, page!.pagination.after!])}>Older →</button>
      </div>
    </section>`
}

interface Detail { s: SessionView; timeline: Timeline }

function SessionDetail(props: { id: string }) {
  const [d, setD] = useState<Detail | null>(null)
  const [error, setError] = useState<string | null>(null)
  const [notice, setNotice] = useState<string | null>(null)
  const [busy, setBusy] = useState(false)
  const [target, setTarget] = useState('')

  // Two requests per reload (each counts against the tenant's rate limit): the session, for its
  // facts and actions, and its timeline, which the service builds in one read of each source.
  const load = () => {
    Promise.all([api<SessionView>(c => c.console.sessions.get(props.id)), api<Timeline>(c => c.console.timeline(props.id))])
      .then(([s, timeline]) => { setD({ s, timeline }); setError(null) }, (e: Error) => setError(e.message))
  }
  useEffect(load, [props.id])
  // Live: every event of this session (a call, an SMS, a swap, the end) reloads both, once the
  // service has written it (events are published after their rows commit).
  useEventRefresh(e => e.data.sessionId === props.id, load, DETAIL_REFRESH_MS, [props.id])

  const act = (what: string, fn: (c: Maskline['console']['sessions']) => Promise<unknown>) => {
    setBusy(true)
    setNotice(null)
    api(c => fn(c.console.sessions)).then(
      () => { setNotice(`${what}: done`); load() },
      (e: MasklineError) => setNotice(`${what} refused: ${e.message}`),
    ).finally(() => setBusy(false))
  }

  if (error && !d) return html`<section class="card"><p class="error">${error}</p><a href="#/sessions">← Sessions</a></section>`
  if (!d) return html`<section class="card"><p class="muted">Loading…</p></section>`
  const { s } = d
  const live = s.state === 'PENDING' || s.state === 'ACTIVE' || s.state === 'GRACE_PERIOD'
  const writer = canAct(login())
  return html`
    <section class="card" id="session-detail" data-session=${s.id} data-state=${s.state}>
      <a href="#/sessions">← Sessions</a>
      <h2>Session via ${s.proxyNumber} <span class=${`badge state-${s.state}`} id="session-state">${s.state.replace('_', ' ')}</span></h2>
      <dl class="facts">
        <dt>Direction</dt><dd>${s.directionMode.replaceAll('_', ' ').toLowerCase()}</dd>
        <dt>Grace period</dt><dd>${s.gracePeriodMinutes} min</dd>
        <dt>Expires</dt><dd>${time(s.expiresAt)}</dd>
        <dt>Calls</dt><dd>${s.callCount}</dd>
      </dl>
      ${writer && live ? html`
        <div class="actions" id="session-actions">
          <button id="end-session" disabled=${busy || s.state === 'GRACE_PERIOD'} onClick=${() => act('End', c => c.end(props.id))}>End session</button>
          <button id="extend-grace" disabled=${busy} onClick=${() => act('Extend grace', c => c.update(props.id, { gracePeriodMinutes: s.gracePeriodMinutes + EXTEND_MINUTES }))}>Grace +${EXTEND_MINUTES} min</button>
          <form id="swap-form" onSubmit=${(e: Event) => {
            e.preventDefault()
            const customerPhone = target.trim()
            setTarget('') // the number typed is sent, never kept on the page
            act('Swap', c => c.swapTarget(props.id, customerPhone))
          }}>
            <input id="swap-target" type="tel" autocomplete="off" placeholder="new party B, E.164" pattern="\\+[1-9][0-9]{6,14}" required
              value=${target} onInput=${(e: Event) => setTarget((e.target as HTMLInputElement).value)} />
            <button disabled=${busy}>Swap party B</button>
          </form>
        </div>` : null}
      ${notice ? html`<p class="notice" id="action-notice">${notice}</p>` : null}
      <h3>Timeline</h3>
      <ol class="timeline" id="timeline">${timeline(d).map(i => html`
        <li data-kind=${i.kind} data-status=${i.status ?? ''}><time>${time(i.at)}</time> <span>${i.text}</span></li>`)}
      </ol>
      ${d.timeline.truncated ? html`<p class="muted" id="timeline-truncated">Only the latest calls, messages and swaps are shown.</p>` : null}
    </section>`
}

interface Item { at: string; kind: string; text: string; status?: string }

function timeline(d: Detail): Item[] {
  const { s } = d
  return d.timeline.data.map((e): Item => {
    switch (e.kind) {
      case 'created': return { at: e.at, kind: e.kind, text: 'Session created' }
      case 'activated': return { at: e.at, kind: e.kind, text: 'Activated' }
      case 'call': {
        const how = e.status === 'COMPLETED' ? `completed, ${duration(e.durationSeconds)}` : e.status.toLowerCase()
        return { at: e.at, kind: e.kind, status: e.status, text: `Call ${party(e.direction, 'from')} → ${party(e.direction, 'to')}: ${how}` }
      }
      case 'sms':
        return { at: e.at, kind: e.kind, status: e.status, text: `SMS ${party(e.direction, 'from')} → ${party(e.direction, 'to')}: ${e.status.toLowerCase()}${e.reason ? ` (${e.reason.replace('_', ' ')})` : ''}` }
      case 'swap': return { at: e.at, kind: e.kind, text: 'Party B swapped (proxy kept)' }
      case 'ended': return { at: e.at, kind: e.kind, text: `Ended; grace period until ${time(s.expiresAt)}` }
      case 'expired': return { at: e.at, kind: e.kind, text: 'Expired' }
      case 'failed': return { at: e.at, kind: e.kind, text: 'Failed' }
    }
  })
}
