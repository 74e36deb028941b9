// docs/operations.md: GET /metrics on its own listener (METRICS_PORT=0 here: a free port), scraped after
// real traffic and parsed strictly as the Prometheus text format (0.0.4): every sample belongs to
// a family declared by # HELP and # TYPE, labels are well formed and never repeat a series,
// histograms are cumulative and end at +Inf = _count. Then what an operator looks for is there,
// and no label value (nor anything else in the exposition) carries an id, a number or a token.
import t from 'tap'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { startTestService } from '../support/service.js'
import { connectWs } from '../support/ws-client.js'

interface Sample { name: string; labels: Record<string, string>; value: number }
interface Family { type: string; help: string; samples: Sample[] }

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/
const LABEL = /^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\["\\n])*)"/
// Prometheus reads values with Go's strconv.ParseFloat: NaN and Inf in any case (prom-client
// writes "Nan" for a gauge with no value yet).
const VALUE = /^(?:[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]?inf|nan)$/i

/** Parses the text exposition format; throws on anything it does not allow. */
export function parseExposition(text: string): Map<string, Family> {
  const families = new Map<string, Family>()
  const seen = new Set<string>()
  const familyOf = (sample: string): Family | undefined => {
    const direct = families.get(sample)
    if (direct) return direct
    for (const suffix of ['_bucket', '_sum', '_count']) {
      if (!sample.endsWith(suffix)) continue
      const f = families.get(sample.slice(0, -suffix.length))
      if (f && (f.type === 'histogram' || (f.type === 'summary' && suffix !== '_bucket'))) return f
    }
    return undefined
  }
  if (!text.endsWith('\n')) throw new Error('the exposition must end with a line feed')
  const lines = text.slice(0, -1).split('\n')
  lines.forEach((line, i) => {
    const where = `line ${i + 1}: ${JSON.stringify(line.slice(0, 120))}`
    if (line.startsWith('# HELP ')) {
      const [, name, help] = /^# HELP (\S+) (.*)$/.exec(line) ?? []
      if (!name || !NAME.test(name)) throw new Error(`bad HELP, ${where}`)
      if (families.has(name)) throw new Error(`family declared twice, ${where}`)
      families.set(name, { type: '', help: help!, samples: [] })
      return
    }
    if (line.startsWith('# TYPE ')) {
      const [, name, type] = /^# TYPE (\S+) (counter|gauge|histogram|summary|untyped)$/.exec(line) ?? []
      const f = name ? families.get(name) : undefined
      if (!f || f.type || f.samples.length) throw new Error(`TYPE without its HELP, twice, or after samples, ${where}`)
      f.type = type!
      return
    }
    if (line === '') return // the format ignores empty lines
    if (line.startsWith('#')) throw new Error(`unexpected comment, ${where}`)
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$/.exec(line)
    if (!m) throw new Error(`bad sample, ${where}`)
    const [, name, rawLabels, rawValue] = m
    if (!VALUE.test(rawValue!)) throw new Error(`bad value, ${where}`)
    const labels: Record<string, string> = {}
    if (rawLabels) {
      let rest = rawLabels.slice(1, -1)
      while (rest.length) {
        const l = LABEL.exec(rest)
        if (!l) throw new Error(`bad label, ${where}`)
        if (l[1]! in labels) throw new Error(`label repeated, ${where}`)
        labels[l[1]!] = l[2]!.replace(/\\n/g, '\n').replace(/\\(["\\])/g, '$1')
        rest = rest.slice(l[0].length)
        if (rest.startsWith(',')) rest = rest.slice(1)
        else if (rest.length) throw new Error(`bad label separator, ${where}`)
      }
    }
    const f = familyOf(name!)
    if (!f || !f.type) throw new Error(`sample of an undeclared family, ${where}`)
    const key = `${name}{${Object.entries(labels).sort().map(([k, v]) => `${k}=${v}`).join(',')}}`
    if (seen.has(key)) throw new Error(`series repeated, ${where}`)
    seen.add(key)
    f.samples.push({ name: name!, labels, value: /nan/i.test(rawValue!) ? NaN : /inf/i.test(rawValue!) ? (rawValue!.startsWith('-') ? -Infinity : Infinity) : Number(rawValue) })
  })
  for (const [name, f] of families) {
    if (!f.type) throw new Error(`${name}: HELP without TYPE`)
    if (f.type !== 'histogram') continue
    // Per series (labels but le): buckets non-decreasing in le, the last +Inf equal to _count.
    const series = new Map<string, { buckets: Array<[number, number]>; count?: number; sum?: number }>()
    for (const s of f.samples) {
      const { le, ...rest } = s.labels
      const key = JSON.stringify(Object.entries(rest).sort())
      let e = series.get(key)
      if (!e) series.set(key, e = { buckets: [] })
      if (s.name === `${name}_bucket`) {
        if (le === undefined) throw new Error(`${name}: bucket without le`)
        e.buckets.push([le === '+Inf' ? Infinity : Number(le), s.value])
      } else if (s.name === `${name}_count`) e.count = s.value
      else if (s.name === `${name}_sum`) e.sum = s.value
      else throw new Error(`${name}: stray sample ${s.name}`)
    }
    for (const [key, e] of series) {
      const b = e.buckets
      if (!b.length || b.at(-1)![0] !== Infinity) throw new Error(`${name} ${key}: no +Inf bucket`)
      for (let i = 1; i < b.length; i++) {
        if (!(b[i]![0] > b[i - 1]![0])) throw new Error(`${name} ${key}: le not increasing`)
        if (b[i]![1] < b[i - 1]![1]) throw new Error(`${name} ${key}: buckets not cumulative`)
      }
      if (e.count !== b.at(-1)![1] || e.sum === undefined) throw new Error(`${name} ${key}: _count ${e.count} != +Inf ${b.at(-1)![1]}, or no _sum`)
    }
  }
  return families
}

function value(families: Map<string, Family>, family: string, sample: string, labels: Record<string, string> = {}): number | undefined {
  return families.get(family)?.samples.find(s => s.name === sample && Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value
}

t.test('the parser refuses what the format does not allow', async t => {
  const ok = '# HELP a x\n# TYPE a counter\na{b="c"} 1\n'
  t.ok(parseExposition(ok).get('a'))
  for (const bad of [
    'a 1\n', // undeclared
    '# HELP a x\n# TYPE a counter\na 1', // no final line feed
    '# HELP a x\n# TYPE a counter\n# note\na 1\n', // a comment that is neither HELP nor TYPE
    '# HELP a x\n# TYPE a counter\na{b="c"} 1\na{b="c"} 2\n', // repeated series
    '# HELP a x\n# TYPE a counter\na{b=c} 1\n', // unquoted label
    '# HELP a x\n# TYPE a counter\na one\n', // bad value
    '# HELP h x\n# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n', // not cumulative
    '# HELP h x\n# TYPE h histogram\nh_bucket{le="1"} 1\nh_bucket{le="+Inf"} 2\nh_sum 1\nh_count 3\n', // count != +Inf
  ]) t.throws(() => parseExposition(bad), JSON.stringify(bad))
})

t.test('GET /metrics on METRICS_PORT: request histograms by route pattern, callbacks, pool, writer, breakers, process', async t => {
  const s = await startTestService(t, { env: { METRICS_PORT: '0' } })
  t.type(s.svc.metricsPort, 'number')
  t.not(s.svc.metricsPort, s.svc.port, 'a listener of its own')
  const acct = await s.signup()
  // A webhook receiver that takes everything: the dispatcher's outcomes are counted.
  const receiver = createServer((req, res) => { req.resume(); req.on('end', () => res.writeHead(204).end()) })
  await new Promise<void>(r => receiver.listen(0, '127.0.0.1', r))
  t.teardown(() => new Promise<void>(r => receiver.close(() => r())))
  const hook = await s.req('POST', '/v1/webhooks', { token: acct.token, body: { url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`, events: ['session.created'] } })
  t.equal(hook.status, 201)
  const agent = s.phone(1), customer = s.phone(2)
  const created = await s.req('POST', '/v1/sessions', { token: acct.token, body: { agentPhone: agent, customerPhone: customer } })
  t.equal(created.status, 201)
  const proxy: string = created.body.proxyNumber
  t.equal((await s.req('GET', `/v1/sessions/${created.body.id}`, { token: acct.token })).status, 200)
  t.equal((await s.req('GET', '/v1/no-such-thing/12345')).status, 404)
  t.equal((await s.req('GET', '/v1/health/ready')).status, 200, 'ready once booted')
  const routed = await s.driver.voice({ from: customer, to: proxy, callSid: `v3:metrics-${process.pid}` })
  t.equal(routed.status, 200)
  t.match(await routed.text(), /<Dial/)
  const unknown = await s.driver.voice({ from: customer, to: '+15550000001', callSid: `v3:metrics-unknown-${process.pid}` })
  t.equal(unknown.status, 200)
  await unknown.text()
  await s.svc.flushRecords()

  const res = await fetch(`http://127.0.0.1:${s.svc.metricsPort}/metrics`)
  t.equal(res.status, 200)
  t.match(res.headers.get('content-type'), /^text\/plain; version=0\.0\.4/)
  const text = await res.text()
  const f = parseExposition(text)
  t.equal((await fetch(`http://127.0.0.1:${s.svc.metricsPort}/other`)).status, 404, 'only /metrics')

  const H = 'maskline_http_request_duration_seconds'
  t.equal(f.get(H)?.type, 'histogram')
  t.ok(value(f, H, `${H}_count`, { route: '/v1/sessions', status_class: '2xx' })! >= 1, 'POST /v1/sessions counted')
  t.ok(value(f, H, `${H}_count`, { route: '/v1/sessions/:id', status_class: '2xx' })! >= 1, 'by route pattern, never the path')
  t.ok(value(f, H, `${H}_count`, { route: 'unmatched', status_class: '4xx' })! >= 1, 'a 404 under one label')
  t.ok(value(f, H, `${H}_count`, { route: '/v1/webhooks/cpaas/voice', status_class: '2xx' })! >= 2, 'voice callbacks')
  t.ok(value(f, H, `${H}_sum`, { route: '/v1/webhooks/cpaas/voice', status_class: '2xx' })! > 0, 'latency summed')
  t.equal(value(f, 'maskline_callbacks_total', 'maskline_callbacks_total', { channel: 'voice', outcome: 'routed' }), 1, 'routed')
  t.equal(value(f, 'maskline_callbacks_total', 'maskline_callbacks_total', { channel: 'voice', outcome: 'unknown_proxy' }), 1, 'unknown proxy')
  t.equal(value(f, 'maskline_callbacks_total', 'maskline_callbacks_total', { channel: 'sms', outcome: 'routed' }), 0, 'zero series exist before the first')
  // The event hub's commits (sql/hub.ts): the create's session.created, the routed call's call.incoming.
  const C = 'maskline_events_committed_total'
  t.equal(value(f, C, C, { type: 'session.created' }), 1, 'a session command\'s event counted')
  t.equal(value(f, C, C, { type: 'call.incoming' }), 1, 'a call record\'s event counted')
  t.equal(value(f, C, C, { type: 'sms.received' }), 0, 'every type has its series')
  t.equal(value(f, 'maskline_live_sessions', 'maskline_live_sessions'), 1)
  t.equal(value(f, 'maskline_proxy_numbers', 'maskline_proxy_numbers', { region: 'US', state: 'in_use' }), 1)
  t.equal(value(f, 'maskline_proxy_numbers', 'maskline_proxy_numbers', { region: 'US', state: 'available' }), 99)
  t.equal(value(f, 'maskline_record_writer_pending', 'maskline_record_writer_pending', { where: 'memory' }), 0, 'writer queue empty after the flush')
  t.ok(value(f, 'maskline_record_writer_flush_seconds', 'maskline_record_writer_flush_seconds')! >= 0)
  t.ok(value(f, 'maskline_outbox_backlog', 'maskline_outbox_backlog')! >= 0, 'the outbox backlog is read (a number, not NaN)')
  // session.created is delivered to the receiver, and counted.
  let delivered = 0
  for (let i = 0; i < 50 && delivered < 1; i++) {
    delivered = value(parseExposition(await s.svc.metrics.registry.metrics()), 'maskline_webhook_attempts_total', 'maskline_webhook_attempts_total', { outcome: 'delivered' }) ?? 0
    if (delivered < 1) await new Promise(r => setTimeout(r, 100))
  }
  t.equal(delivered, 1, 'the webhook delivery counted')
  t.equal(value(f, 'maskline_stream_clients', 'maskline_stream_clients'), 0)
  // A stream client: counted while connected, its close counted by reason.
  const ws = await connectWs(`${s.url}/v1/stream`, { headers: { authorization: `Bearer ${acct.token}` } })
  const scrape = async () => parseExposition(await s.svc.metrics.registry.metrics())
  t.equal(value(await scrape(), 'maskline_stream_clients', 'maskline_stream_clients'), 1, 'one stream client')
  ws.close(1000)
  await ws.closed
  let normal = 0
  for (let i = 0; i < 50 && normal < 1; i++) {
    normal = value(await scrape(), 'maskline_stream_closes_total', 'maskline_stream_closes_total', { reason: 'normal' }) ?? 0
    if (normal < 1) await new Promise(r => setTimeout(r, 20))
  }
  t.equal(normal, 1, 'its close counted as normal')
  t.equal(value(f, 'maskline_circuit_breaker_state', 'maskline_circuit_breaker_state', { provider: 'sandbox', state: 'CLOSED' }), 1)
  t.equal(value(f, 'maskline_circuit_breaker_state', 'maskline_circuit_breaker_state', { provider: 'sandbox', state: 'OPEN' }), 0)
  t.equal(value(f, 'maskline_ready', 'maskline_ready'), 1)
  t.ok(f.has('maskline_webhook_attempts_total') && f.has('maskline_stream_closes_total'))
  for (const name of ['nodejs_eventloop_lag_seconds', 'nodejs_gc_duration_seconds', 'nodejs_heap_size_used_bytes', 'process_cpu_user_seconds_total', 'process_resident_memory_bytes']) {
    t.ok(f.has(name), `default process metric ${name}`)
  }

  // Labels: route patterns, classes, names from fixed lists; never an id, a number or a secret.
  const labelValues = [...f.values()].flatMap(x => x.samples.flatMap(s => Object.entries(s.labels).filter(([k]) => k !== 'le').map(([, v]) => v)))
  const bad = labelValues.filter(v => /[0-9a-f]{8}-[0-9a-f]{4}-/i.test(v) || /\d{5,}/.test(v) || /^\+/.test(v))
  t.same([...new Set(bad)], [], 'no label value looks like an id or a number')
  for (const secret of [agent, customer, proxy, acct.tenantId, acct.token, acct.apiSecret, created.body.id]) {
    t.notOk(text.includes(secret), 'the exposition never carries a party, proxy, id or secret')
  }
})

t.test('METRICS_PORT=off: no listener', async t => {
  const s = await startTestService(t, { env: { METRICS_PORT: 'off' } })
  t.equal(s.svc.metricsPort, null)
})

t.test('ACCESS_LOG=failures: successes are counted, not logged; failures and the rest are', async t => {
  const s = await startTestService(t, { env: { METRICS_PORT: 'off', ACCESS_LOG: 'failures' } })
  const before = s.logLines.length
  t.equal((await s.req('GET', '/v1/health')).status, 200)
  t.equal((await s.req('GET', '/v1/nothing-here')).status, 404)
  const lines = s.logLines.slice(before).map(l => JSON.parse(l) as Record<string, unknown>).filter(l => 'route' in l && 'status' in l)
  t.same(lines.map(l => l['status']), [404], 'only the failure has a line')
  const H = 'maskline_http_request_duration_seconds'
  const f = parseExposition(await s.svc.metrics.registry.metrics())
  t.equal(value(f, H, `${H}_count`, { route: '/v1/health', status_class: '2xx' }), 1, 'the success is counted')
})

t.test('session creates that reach the database together are counted as batches', async t => {
  const s = await startTestService(t, { env: { METRICS_PORT: '0' } })
  const acct = await s.signup()
  const S = 'maskline_session_create_statements_total'
  const B = 'maskline_session_creates_batched_total'
  // Whether creates sent at once reach the database together depends on the machine's timing
  // (the batcher itself is tested step by step in test/sql/create-batcher.test.ts): bursts of 12
  // until one batch is seen, at most 5 (the tier's 100 live sessions leave room).
  const n = 12
  let sent = 0
  for (let burst = 0; burst < 5; burst++) {
    const created = await Promise.all(Array.from({ length: n }, (_, k) =>
      s.req('POST', '/v1/sessions', { token: acct.token, body: { agentPhone: s.phone(100 + sent + k), customerPhone: s.phone(400 + sent + k) } })))
    sent += n
    t.same(created.map(r => r.status), created.map(() => 201))
    const f = parseExposition(await s.svc.metrics.registry.metrics())
    t.equal(f.get(S)?.type, 'counter')
    const alone = value(f, S, S, { kind: 'alone' })
    const batches = value(f, S, S, { kind: 'batch' })
    const batched = value(f, B, B)
    t.equal(value(f, S, S, { kind: 'batch_undone' }), 0, 'nothing refused, no batch undone')
    t.equal(alone! + batched!, sent, 'every create counted once: alone or in a batch')
    t.ok(batched! >= 2 * batches!, 'a batch holds two creates or more')
    if (batches! >= 1 || burst === 4) {
      t.ok(batches! >= 1, `${sent} in bursts of ${n}: ${batches} batches wrote ${batched} creates, ${alone} went alone`)
      break
    }
  }
})
