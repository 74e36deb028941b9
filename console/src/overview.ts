// Overview: live sessions by state, calls and SMS per minute (backfilled from
// /v1/console/overview, then counted from the stream), proxy pool use per region, webhook
// delivery health, provider circuit states.
import { html } from 'htm/preact'
import { useCallback, useEffect, useMemo, useState } from 'preact/hooks'
import { api } from './api.js'
import { MinuteChart } from './chart.js'
import { maskDigits, percent, time } from './format.js'
import { onEvent } from './live.js'

const WINDOW_MINUTES = 60
const LOW_FREE = 0.2 // Warn below 20 % free
// The console's requests count against the tenant's per-minute limit (contract 8.1): the chart lives
// on the stream, and the figures without events are polled slowly (about 4 requests a minute).
const SESSION_REFRESH_MS = 2_000

interface Overview {
  sessions: { PENDING: number; ACTIVE: number; GRACE_PERIOD: number }
  activity: { from: string; minutes: Array<{ minute: string; calls: number; sms: number }> }
}
interface Pool { region: string; provider?: string; total: number; available: number; inUse: number; cooldown: number }
interface Delivery { id: string; event: string; statusCode: number; success: boolean; attemptCount: number; error: string | null; requestedAt: string }
interface Webhook { url: string | null; events: string[]; recentDeliveries: Delivery[] }
interface Breaker { name: string; state: 'CLOSED' | 'OPEN' | 'HALF_OPEN'; openedAt: string | null; lastError: string | null }

type Counts = Map<number, { calls: number; sms: number }>

const minuteOf = (ms: number): number => Math.floor(ms / 60_000) * 60

/** Polls `load` every `everyMs` and whenever `bump` changes. */
function usePolled<T>(load: () => Promise<T>, everyMs: number, bump = 0): { value: T | null; error: string | null } {
  const [state, setState] = useState<{ value: T | null; error: string | null }>({ value: null, error: null })
  useEffect(() => {
    let live = true
    const run = () => { void load().then(v => live && setState({ value: v, error: null }), (e: Error) => live && setState(s => ({ ...s, error: e.message }))) }
    run()
    const t = setInterval(run, everyMs)
    return () => { live = false; clearInterval(t) }
  }, [bump])
  return state
}

export function OverviewPage() {
  const [counts, setCounts] = useState<Counts>(new Map())
  const [now, setNow] = useState(Date.now())
  const [sessionBump, setSessionBump] = useState(0)
  const overview = usePolled(() => api<Overview>(c => c.console.overview({ minutes: WINDOW_MINUTES })), 60_000, sessionBump)

  // The backfill replaces what the stream counted only for minutes it covers and that are over.
  useEffect(() => {
    const o = overview.value
    if (!o) return
    setCounts(prev => {
      const next: Counts = new Map(prev)
      const current = minuteOf(Date.now())
      for (const m of o.activity.minutes) {
        const k = minuteOf(Date.parse(m.minute))
        const had = next.get(k)
        next.set(k, k === current && had ? { calls: Math.max(had.calls, m.calls), sms: Math.max(had.sms, m.sms) } : { calls: m.calls, sms: m.sms })
      }
      return next
    })
  }, [overview.value])

  useEffect(() => {
    let pending: ReturnType<typeof setTimeout> | null = null
    const off = onEvent(e => {
      if (e.type === 'call.incoming' || e.type === 'sms.received') {
        const k = minuteOf(Date.parse(e.createdAt))
        setCounts(prev => {
          const next: Counts = new Map(prev)
          const c = next.get(k) ?? { calls: 0, sms: 0 }
          next.set(k, e.type === 'call.incoming' ? { ...c, calls: c.calls + 1 } : { ...c, sms: c.sms + 1 })
          return next
        })
        setNow(Date.now())
      }
      if (e.type.startsWith('session.') && !pending) {
        pending = setTimeout(() => { pending = null; setSessionBump(b => b + 1) }, SESSION_REFRESH_MS)
      }
    })
    const tick = setInterval(() => setNow(Date.now()), 15_000)
    return () => { off(); clearInterval(tick); if (pending) clearTimeout(pending) }
  }, [])

  const data = useMemo(() => {
    const last = minuteOf(now)
    const xs: number[] = [], calls: number[] = [], sms: number[] = []
    for (let m = last - (WINDOW_MINUTES - 1) * 60; m <= last; m += 60) {
      const c = counts.get(m)
      xs.push(m); calls.push(c?.calls ?? 0); sms.push(c?.sms ?? 0)
    }
    return [xs, calls, sms] as [number[], number[], number[]]
  }, [counts, now])

  const s = overview.value?.sessions
  return html`
    <section class="grid">
      <div class="card wide" id="sessions-by-state">
        <h2>Live sessions</h2>
        ${overview.error ? html`<p class="error">${overview.error}</p>` : null}
        <div class="stats">
          ${(['PENDING', 'ACTIVE', 'GRACE_PERIOD'] as const).map(k => html`
            <div class="stat" data-state=${k}><span class="value">${s ? s[k] : '…'}</span><span class="label">${k.replace('_', ' ').toLowerCase()}</span></div>`)}
        </div>
      </div>
      <div class="card wide">
        <h2>Calls and SMS per minute <small>(last hour, UTC)</small></h2>
        <${MinuteChart} id="activity-chart" data=${data}
          series=${[{ label: 'Calls', stroke: '#2563eb' }, { label: 'SMS', stroke: '#16a34a' }]} />
      </div>
      <${PoolCard} bump=${sessionBump} />
      <${WebhookHealthCard} />
      <${CircuitCard} />
    </section>`
}

function PoolCard(props: { bump: number }) {
  const pools = usePolled(() => api<{ pools: Pool[] }>(c => c.console.numbers.pool()), 30_000, props.bump)
  const rows = pools.value?.pools ?? []
  return html`
    <div class="card" id="pool">
      <h2>Proxy pool</h2>
      ${pools.error ? html`<p class="error">${pools.error}</p>` : null}
      ${pools.value && rows.length === 0 ? html`<p class="muted">No proxy numbers configured.</p>` : null}
      <table>
        <thead><tr><th>Region</th><th>In use</th><th>Cooling down</th><th>Free</th><th></th></tr></thead>
        <tbody>
          ${rows.map(p => {
            const low = p.total > 0 && p.available / p.total < LOW_FREE
            return html`<tr class=${low ? 'low' : ''} data-region=${p.region}>
              <td>${p.region}${p.provider ? html` <small>${p.provider}</small>` : null}</td>
              <td>${p.inUse}</td><td>${p.cooldown}</td><td>${p.available} <small>(${percent(p.available, p.total)})</small></td>
              <td>${low ? html`<span class="badge warn">below 20 % free</span>` : null}</td>
            </tr>
            <tr class="bar-row"><td colspan="5"><div class="bar">
              <span class="in-use" style=${{ width: `${(p.inUse / Math.max(1, p.total)) * 100}%` }}></span>
              <span class="cooldown" style=${{ width: `${(p.cooldown / Math.max(1, p.total)) * 100}%` }}></span>
            </div></td></tr>`
          })}
        </tbody>
      </table>
    </div>`
}

function WebhookHealthCard() {
  const wh = usePolled(() => api<Webhook>(c => c.console.webhooks.list()), 60_000)
  const d = wh.value?.recentDeliveries ?? []
  const ok = d.filter(x => x.success).length
  const failures = d.filter(x => !x.success).slice(0, 5)
  return html`
    <div class="card" id="webhook-health">
      <h2>Webhook deliveries</h2>
      ${wh.error ? html`<p class="error">${wh.error}</p>` : null}
      ${wh.value && wh.value.url === null ? html`<p class="muted">No webhook configured.</p>` : null}
      ${wh.value && wh.value.url !== null ? html`
        ${d.length === 0 ? html`<p class="muted">No deliveries yet.</p>`
          : html`<p><span class="value">${percent(ok, d.length)}</span> success over the last ${d.length} attempts</p>`}
        ${failures.length ? html`<ul class="failures">${failures.map(f => html`
          <li>${time(f.requestedAt)} · ${f.event} · ${f.statusCode || 'no answer'}${f.error ? ` · ${maskDigits(f.error)}` : ''}</li>`)}</ul>`
        : html`<p class="muted">No failures.</p>`}` : null}
    </div>`
}

function CircuitCard() {
  const load = useCallback(() => api<{ providers: Breaker[] }>(c => c.health.cpaas()), [])
  const c = usePolled(load, 10_000)
  return html`
    <div class="card" id="circuits">
      <h2>Provider circuits</h2>
      ${c.error ? html`<p class="error">${c.error}</p>` : null}
      <ul class="circuits">${(c.value?.providers ?? []).map(p => html`
        <li data-provider=${p.name}><span class=${`badge ${p.state === 'CLOSED' ? 'ok' : p.state === 'OPEN' ? 'bad' : 'warn'}`}>${p.state.replace('_', ' ')}</span>
          ${p.name}${p.openedAt ? html` <small>since ${time(p.openedAt)}</small>` : null}
          ${p.lastError ? html`<div class="muted">${maskDigits(p.lastError)}</div>` : null}</li>`)}</ul>
    </div>`
}
