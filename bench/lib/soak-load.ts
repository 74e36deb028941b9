// The soak's steady mix (bench/scenarios/soak.ts), paced per second rather than as fast as it
// goes: voice fetches with their Dial action and parent status callbacks, inbound SMS relayed,
// session reads, creates, swaps and ends (the live count stays about where it started), a token
// exchange every few seconds (its token is then the tenant's for the REST traffic), and WebSocket
// clients of which one reconnects now and then. Every answer is kept by kind and minute; what was
// acknowledged (answered calls and SMS, created sessions) is kept for the final check that
// nothing acknowledged was lost.
import { randomUUID } from 'node:crypto'
import { CallbackDriver } from '../../test/support/callback-driver.js'
import { connectWs, type WsClient } from '../../test/support/ws-client.js'
import { freshNumber } from './requests.js'
import { sleep } from './proc.js'

export interface SoakRates {
  voicePerS: number
  smsPerS: number
  readsPerS: number
  createsPerS: number
  swapEveryS: number
  tokenEveryS: number
  streamClients: number
  reconnectEveryS: number
}

/** The mix of the issue that measured the growth: a small ENTERPRISE deployment's steady day. */
/** Stream clients whose every frame is checked against the outbox (the rest are connected and churned). */
const STEADY_CHECKED = 25

export const SOAK_RATES: SoakRates = { voicePerS: 60, smsPerS: 10, readsPerS: 30, createsPerS: 2, swapEveryS: 5, tokenEveryS: 5, streamClients: 500, reconnectEveryS: 1.5 }

/** The mix with its request rates times `scale` (--rate-scale: a busy or small machine); clients and the token pace as they are. */
export function scaledRates(scale: number): SoakRates {
  const r = SOAK_RATES
  return { ...r, voicePerS: r.voicePerS * scale, smsPerS: r.smsPerS * scale, readsPerS: r.readsPerS * scale, createsPerS: r.createsPerS * scale, swapEveryS: r.swapEveryS / scale }
}

export interface LiveSession { id: string; tenant: number; agent: string; customer: string; proxy: string; created: boolean }
export interface Node { url: string }
export type Kind = 'voice' | 'callback' | 'sms' | 'read' | 'create' | 'swap' | 'end' | 'token' | 'stream'

export interface SteadySpan { from: number; to: number }

/** One answer: when, what, how long it took, its status (0: no answer). */
export interface Sample { at: number; kind: Kind; ms: number; status: number }

export interface SoakLoad {
  samples: Sample[]
  /** CallSids whose voice fetch was answered with a <Dial>. */
  answeredCalls: string[]
  /** Inbound message ids answered 200. */
  answeredSms: string[]
  /** Event ids seen, per steady stream client (tenant 0's; never dropped by the load). */
  steadyFrames: Array<Set<string>>
  /** When each steady client was connected (the node ends a stream when its token expires). */
  steadySpans: SteadySpan[][]
  /** Stops the traffic (the stream clients stay, for the final check). */
  stop(): Promise<void>
  /** Closes the stream clients. */
  close(): void
}

export interface SoakLoadOpts {
  nodes: readonly Node[]
  tenants: number
  /** Current tenant tokens (index = tenant); the token loop replaces them. */
  tokens: string[]
  creds: ReadonlyArray<{ apiKey: string; apiSecret: string }>
  sessions: LiveSession[]
  rates: SoakRates
  onError: (what: string) => void
}

const pick = <T>(xs: readonly T[]): T => xs[Math.floor(Math.random() * xs.length)]!

/** Runs `fn` `perS` times a second (spread evenly, none waits for the previous) until stopped. */
function paced(perS: number, running: () => boolean, fn: () => Promise<void>): Promise<void> {
  if (perS <= 0) return Promise.resolve()
  const gap = 1000 / perS
  const inflight = new Set<Promise<void>>()
  return (async () => {
    let next = performance.now()
    while (running()) {
      const p = fn().catch(() => {}).finally(() => inflight.delete(p))
      inflight.add(p)
      next += gap
      const wait = next - performance.now()
      if (wait > 0) await sleep(wait)
      else if (wait < -1000) next = performance.now() // fell behind (the machine stalled): no burst to catch up
    }
    await Promise.all(inflight)
  })()
}

export function startSoakLoad(o: SoakLoadOpts): SoakLoad {
  const samples: Sample[] = []
  const answeredCalls: string[] = []
  const answeredSms: string[] = []
  let running = true
  let k = 0
  const drivers = o.nodes.map(n => new CallbackDriver({ baseUrl: n.url, mode: 'none' }))
  const live = o.sessions

  async function timed(kind: Kind, fn: () => Promise<Response>): Promise<{ res: Response | null; text: string }> {
    const t0 = performance.now()
    try {
      const res = await fn()
      const text = await res.text()
      samples.push({ at: Date.now(), kind, ms: performance.now() - t0, status: res.status })
      return { res, text }
    } catch {
      samples.push({ at: Date.now(), kind, ms: performance.now() - t0, status: 0 })
      return { res: null, text: '' }
    }
  }

  const rest = (method: string, path: string, tenant: number, body?: unknown) => {
    const node = pick(o.nodes)
    return fetch(node.url + path, {
      method, body: body === undefined ? undefined : JSON.stringify(body),
      headers: { authorization: `Bearer ${o.tokens[tenant]}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    })
  }

  async function voice(): Promise<void> {
    const s = pick(live)
    const d = pick(drivers)
    const callSid = `soak-${randomUUID()}`
    const { res, text } = await timed('voice', () => d.voice({ from: s.agent, to: s.proxy, callSid }))
    if (res?.status !== 200 || !text.includes('<Dial')) return
    answeredCalls.push(callSid)
    const callId = decodeURIComponent(/callId=([^"&<]+)/.exec(text)?.[1] ?? '')
    await timed('callback', () => d.dialStatus({ callId, callSid, dialCallStatus: 'completed', dialCallSid: `${callSid}-b`, dialCallDuration: 30 }))
    await timed('callback', () => d.parentStatus({ callSid, callStatus: 'completed', callDuration: 31 }))
  }

  async function sms(): Promise<void> {
    const s = pick(live)
    const messageId = `SMsoak${randomUUID().replaceAll('-', '')}`
    const { res } = await timed('sms', () => pick(drivers).smsForm({ from: s.agent, to: s.proxy, text: 'on my way', messageId }))
    if (res?.status === 200) answeredSms.push(messageId)
  }

  async function read(): Promise<void> {
    const s = pick(live)
    await timed('read', () => rest('GET', `/v1/sessions/${s.id}`, s.tenant))
  }

  async function create(): Promise<void> {
    const n = k++
    const tenant = n % o.tenants
    const agent = freshNumber(505, n)
    const customer = freshNumber(606, n)
    const { res, text } = await timed('create', () => rest('POST', '/v1/sessions', tenant, { agentPhone: agent, customerPhone: customer }))
    if (res?.status !== 201) return
    const b = JSON.parse(text) as { id: string; proxyNumber: string }
    live.push({ id: b.id, tenant, agent, customer, proxy: b.proxyNumber, created: true })
    // The oldest created session ends: the live count holds.
    const i = live.findIndex(x => x.created)
    if (i === -1 || live.filter(x => x.created).length <= 1) return
    const [old] = live.splice(i, 1)
    await timed('end', () => rest('POST', `/v1/sessions/${old!.id}/end`, old!.tenant))
  }

  async function swap(): Promise<void> {
    const s = live.find(x => x.created)
    if (!s) return
    const customer = freshNumber(707, k++)
    const { res } = await timed('swap', () => rest('PATCH', `/v1/sessions/${s.id}/target`, s.tenant, { customerPhone: customer }))
    if (res?.status === 200) s.customer = customer
  }

  let t = 0
  async function token(): Promise<void> {
    const tenant = t++ % o.tenants
    const c = o.creds[tenant]!
    const { res, text } = await timed('token', () => fetch(`${pick(o.nodes).url}/v1/auth/token`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ apiKey: c.apiKey, apiSecret: c.apiSecret }),
    }))
    if (res?.status === 200) o.tokens[tenant] = (JSON.parse(text) as { accessToken: string }).accessToken
  }

  // Stream clients of tenant 0, spread over the nodes: a few are never dropped by the load (their
  // frames are checked against the outbox: a set of ids each), the others take turns reconnecting.
  const steadyCount = Math.min(STEADY_CHECKED, Math.ceil(o.rates.streamClients / 2))
  const steadyFrames: Array<Set<string>> = []
  const churn: Array<WsClient | null> = []
  const connect = async (i: number, onId?: (id: string) => void, after?: string): Promise<WsClient | null> => {
    const node = o.nodes[i % o.nodes.length]!
    const t0 = performance.now()
    try {
      const c = await connectWs(`${node.url}/v1/stream${after ? `?after=${after}` : ''}`, { headers: { authorization: `Bearer ${o.tokens[0]}` }, keepMessages: false })
      samples.push({ at: Date.now(), kind: 'stream', ms: performance.now() - t0, status: 101 })
      if (onId) c.onMessage = text => { try { onId((JSON.parse(text) as { id: string }).id) } catch { /* not an event */ } }
      return c
    } catch (err) {
      samples.push({ at: Date.now(), kind: 'stream', ms: performance.now() - t0, status: (err as { status?: number }).status ?? 0 })
      return null
    }
  }
  // A steady client closed by the node (its token's lifetime ends the stream: 900 s; a restart)
  // connects again at once with the tenant's current token and `after=` the largest id it got, as
  // the SDK does: its span goes on, and it owes every event of the span. Told to resynchronise
  // (4410), its span ends there and a new one starts without `after`.
  const spans: SteadySpan[][] = []
  const steady: Array<WsClient | null> = []
  const lastIds: string[] = []
  const keepSteady = async (i: number, span?: SteadySpan): Promise<void> => {
    const c = await connect(i, id => {
      steadyFrames[i]!.add(id)
      if (!lastIds[i] || id > lastIds[i]!) lastIds[i] = id
    }, span ? lastIds[i] : undefined)
    steady[i] = c
    if (!c) {
      if (span && running) { await new Promise(r => setTimeout(r, 500)); return keepSteady(i, span) } // a node restarting
      if (span) span.to = Date.now()
      o.onError(`steady stream client ${i} could not connect`)
      return
    }
    if (!span) {
      span = { from: Date.now(), to: Infinity }
      spans[i]!.push(span)
    }
    const mine = span
    void c.closed.then(code => {
      if (!running) { mine.to = Date.now(); return }
      if (code === 4410) { mine.to = Date.now(); lastIds[i] = ''; return keepSteady(i) }
      return keepSteady(i, mine)
    })
  }
  const steadyReady = Promise.all(Array.from({ length: steadyCount }, (_, i) => {
    steadyFrames.push(new Set())
    spans.push([])
    return keepSteady(i)
  }))
  const loops: Array<Promise<void>> = []
  const isRunning = () => running
  const start = steadyReady.then(async () => {
    for (let i = 0; i < o.rates.streamClients - steadyCount; i++) churn.push(await connect(i))
    let turn = 0
    loops.push(
      paced(o.rates.voicePerS, isRunning, voice),
      paced(o.rates.smsPerS, isRunning, sms),
      paced(o.rates.readsPerS, isRunning, read),
      paced(o.rates.createsPerS, isRunning, create),
      paced(1 / o.rates.swapEveryS, isRunning, swap),
      paced(1 / o.rates.tokenEveryS, isRunning, token),
      paced(churn.length ? 1 / o.rates.reconnectEveryS : 0, isRunning, async () => {
        const i = turn++ % churn.length
        churn[i]?.socket.destroy()
        churn[i] = await connect(i)
      }),
    )
  })

  return {
    samples, answeredCalls, answeredSms, steadyFrames, steadySpans: spans,
    async stop() {
      running = false
      await start
      await Promise.all(loops)
    },
    close() {
      running = false
      for (const c of [...steady, ...churn]) c?.socket.destroy()
    },
  }
}
