// A fast-check property over every operation of the OpenAPI document and
// the five provider callbacks, against the whole service. Requests are drawn from each
// operation's own schemas (mostly valid, some fields wild) and from plain garbage: arbitrary
// JSON, raw bytes, invalid UTF-8, NUL and lone-surrogate escapes, deep nesting, `__proto__`
// keys, wrong content types, bad tokens, broken percent-encoding. Whatever comes in:
//   - never a 5xx (503 pool-exhausted and the 501 of number provisioning aside: documented);
//   - every REST error is a problem document (application/problem+json, its status, its type);
//   - a callback refusal is the callback's own answer (<Response/>, {"ok":false}) or a problem;
//   - no phone number sent in a request comes back in a REST answer, and none reaches a log
//     line (the harness fails the file on any number in the log at teardown);
//   - nothing fails behind the answer either: no error-level log line, and no Postgres data
//     error (SQLSTATE class 22, 23, 42) from the write-behind of call and SMS records, which
//     answers the provider before writing (a NUL there used to be retried, not answered 500).
//
// `npm test` runs FUZZ_RUNS=2000 cases (75% REST, 25% callbacks); `npm run fuzz -- --fuzz N`
// runs N on both backends without the per-file timeout. FUZZ_SEED replays a reported failure.
import t, { type Test } from 'tap'
import fc from 'fast-check'
import { sql } from 'slonik'
import { encodeForm } from '../../api/cpaas/form.js'
import { startTestService } from '../support/service.js'

const RUNS = Math.max(2, Number(process.env.FUZZ_RUNS ?? 2000))
const REST_RUNS = Math.round(RUNS * 0.75)
const CALLBACK_RUNS = RUNS - REST_RUNS
const SEED = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : undefined
/** Cases between two simulated minutes: tenant rate limits slide, tokens are renewed. */
const CASES_PER_MINUTE = 400

type Json = Record<string, any>

const E164_RE = /\+\d{7,15}/g
/** The seeded pool (contract D1): proxy numbers, which answers carry by design. */
const POOL_RE = /^\+120255501\d\d$/
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

const NASTY = [
  '', ' ', '\u0000', 'a\u0000b', '\ud800', 'x\udfffy', '\u202e\u0000', '%00', '%', '%zz', '%c0%af', '%ff', '\\u0000',
  '__proto__', 'constructor', 'prototype', 'toString', '../../etc/passwd', '<Response/>', ']]><x/>', "' OR 1=1 --",
  '${jndi:ldap://x}', 'null', 'true', '-1', '1e309', 'NaN', '{"a":1}', '[]', 'ü', '🎉', 'x'.repeat(5000),
  '+0123456789', '+1 555 555 0100', '+999999999999999999', '2026-02-30T25:61:61Z', '9999-12-31T23:59:59.999Z',
  'https://127.0.0.1/x', 'https://user:pw@example.com/', 'http://[::1]/', 'javascript:alert(1)',
]

const nasty = fc.constantFrom(...NASTY)
const phone = fc.integer({ min: 1_000_000, max: 999_999_999_999 }).map(n => `+${n}`)
const text = fc.oneof(
  { weight: 4, arbitrary: fc.string({ maxLength: 40 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
  { weight: 3, arbitrary: nasty },
  { weight: 1, arbitrary: phone },
)
const wild: fc.Arbitrary<unknown> = fc.oneof(fc.jsonValue({ maxDepth: 3 }), text, fc.constant(undefined))

interface World {
  ids: string[]
  callIds: string[]
  proxies: string[]
  parties: string[]
}

/** Values for a JSON schema: valid most of the time, a wild or nasty value now and then. */
function arbFor(s: Json, w: World, depth = 0, key = ''): fc.Arbitrary<unknown> {
  if (depth > 4) return fc.constant(null)
  return fc.oneof({ weight: 10, arbitrary: validFor(s, w, depth, key) }, { weight: 1, arbitrary: wild }, { weight: 1, arbitrary: nasty })
}

function validFor(s: Json, w: World, depth: number, key: string): fc.Arbitrary<unknown> {
  if (s.anyOf || s.oneOf) return fc.oneof(...(s.anyOf ?? s.oneOf).map((v: Json) => arbFor(v, w, depth, key)))
  if (s.allOf) return validFor({ type: 'object', properties: Object.assign({}, ...s.allOf.map((p: Json) => p.properties ?? {})), required: s.allOf.flatMap((p: Json) => p.required ?? []) }, w, depth, key)
  if (s.const !== undefined) return fc.constant(s.const)
  if (s.enum) return fc.constantFrom(...(s.enum as unknown[]))
  switch (s.type) {
    case 'object': {
      const props = (s.properties ?? {}) as Record<string, Json>
      const shape: Record<string, fc.Arbitrary<unknown>> = {}
      for (const [k, sub] of Object.entries(props)) shape[k] = arbFor(sub, w, depth + 1, k)
      const known = fc.record(shape, { requiredKeys: (s.required ?? []).filter((k: string) => k in props) })
      const extraSchema: Json | null = s.patternProperties ? Object.values(s.patternProperties)[0] as Json : typeof s.additionalProperties === 'object' ? s.additionalProperties : null
      const extra = fc.dictionary(fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom('__proto__', 'constructor', 'a\u0000')), extraSchema ? arbFor(extraSchema, w, depth + 1) : wild, { maxKeys: 4 })
      return fc.tuple(known, fc.option(extra, { freq: 3 })).map(([a, b]) => {
        if (!b) return a
        // Own properties, `__proto__` included, as JSON.parse would make them.
        const out: Record<string, unknown> = { ...a as object }
        for (const k of Object.keys(b)) Object.defineProperty(out, k, { value: b[k], enumerable: true, writable: true, configurable: true })
        return out
      })
    }
    case 'array': return fc.array(arbFor(s.items ?? {}, w, depth + 1), { maxLength: Math.min(s.maxItems ?? 5, 5) })
    case 'integer': return fc.integer({ min: s.minimum ?? -1_000, max: s.maximum ?? 1_000_000 })
    case 'number': return fc.double({ noNaN: true, noDefaultInfinity: true })
    case 'boolean': return fc.boolean()
    case 'null': return fc.constant(null)
    case 'string': return stringFor(s, w, key)
    default: return wild
  }
}

function stringFor(s: Json, w: World, key: string): fc.Arbitrary<string> {
  const pattern = String(s.pattern ?? '')
  // The tenant's support number is configuration, answered back by design: never a party's.
  if (pattern.includes('\\+[1-9]')) return key === 'supportPhone' ? fc.constantFrom('+12025550188', '+442079460000') : fc.oneof(phone, fc.constantFrom(...w.parties))
  if (s.format === 'uuid' || pattern.includes('[0-9a-f]{8}')) return fc.oneof(fc.uuid(), fc.constantFrom(...w.ids))
  if (s.format === 'date-time') return fc.date({ min: new Date('2020-01-01'), max: new Date('2030-01-01'), noInvalidDate: true }).map(d => d.toISOString())
  if (s.format === 'uri' || pattern.startsWith('^http')) return fc.constantFrom('https://hooks.example.com/x', 'https://93.184.215.14/h', 'http://hooks.example.com/', 'https://10.0.0.1/')
  if (s.format === 'email') return fc.emailAddress()
  return fc.string({ minLength: s.minLength ?? 0, maxLength: Math.min(s.maxLength ?? 60, 60) })
}

interface Op { method: string; path: string; auth: string | null; pathParams: string[]; query: { name: string; schema: Json }[]; body: Json | null }

interface RestCase { op: Op; params: string[]; query: string; body: { ct: string | null; data: string | Uint8Array | null }; auth: string }

/** Mostly the token the operation takes, so requests get past authentication; sometimes not. */
function authFor(op: Op): fc.Arbitrary<string> {
  const right = op.auth === 'tenant' ? ['tenant'] : op.auth === 'user' ? ['owner'] : op.auth === 'any' ? ['tenant', 'owner'] : ['none']
  return fc.oneof({ weight: 8, arbitrary: fc.constantFrom(...right) }, { weight: 2, arbitrary: fc.constantFrom('tenant', 'owner', 'none', 'garbage', 'unsigned') })
}

function restCase(op: Op, w: World): fc.Arbitrary<RestCase> {
  const pathValue = fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom(...w.ids, ...w.callIds) },
    { weight: 2, arbitrary: fc.uuid() },
    { weight: 2, arbitrary: text.map(enc) },
    { weight: 1, arbitrary: fc.constantFrom('%00', '%zz', '%c0%80', '%ff', 'a%00b', '.', '..') },
  )
  const queryPart = fc.oneof(
    fc.tuple(fc.constantFrom(...op.query.map(q => q.name), 'x'), fc.oneof(...op.query.map(q => arbFor(q.schema, w)), text))
      .map(([k, v]) => `${enc(k)}=${enc(typeof v === 'string' ? v : JSON.stringify(v) ?? '')}`),
    fc.constantFrom('after=%00', 'limit=%zz', 'a=%c0%af', '=x', '&&', 'userPhone=+14155551001', `${'q'.repeat(3000)}=1`),
  )
  const jsonBody = op.body ? arbFor(op.body, w).map(v => JSON.stringify(v) ?? '') : wild.map(v => JSON.stringify(v) ?? '')
  const body = fc.oneof(
    { weight: 12, arbitrary: jsonBody.map(d => ({ ct: 'application/json', data: d as string | Uint8Array | null })) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 200 }).map(d => ({ ct: 'application/json', data: d })) },
    { weight: 1, arbitrary: fc.constantFrom('{"a":"\\u0000"}', '{"a":"\\ud800"}', '{"metadata":{"__proto__":"x"}}', '['.repeat(5000), `{"a":${'['.repeat(40)}${']'.repeat(40)}}`, '{"a":1,', '\u0000', '"x"', '1e999')
      .map(d => ({ ct: 'application/json', data: d })) },
    { weight: 1, arbitrary: fc.tuple(fc.constantFrom('text/plain', 'application/x-www-form-urlencoded', 'application/json; charset=latin1', 'application/problem+json', null), jsonBody)
      .map(([ct, d]) => ({ ct, data: d })) },
    { weight: 1, arbitrary: fc.constant({ ct: null, data: null }) },
  )
  return fc.record({
    op: fc.constant(op),
    params: fc.array(pathValue, { minLength: op.pathParams.length, maxLength: op.pathParams.length }),
    query: fc.array(queryPart, { maxLength: 4 }).map(parts => parts.join('&')),
    body,
    auth: authFor(op),
  })
}

const CALLBACKS = ['voice', 'voice/status', 'voice/dial-status', 'voice/recording', 'sms'] as const
const FIELDS: Record<(typeof CALLBACKS)[number], string[]> = {
  voice: ['CallSid', 'From', 'To', 'AccountSid', 'CallStatus', 'Direction'],
  'voice/status': ['CallSid', 'ParentCallSid', 'CallStatus', 'CallDuration'],
  'voice/dial-status': ['CallSid', 'DialCallStatus', 'DialCallSid', 'DialCallDuration', 'RecordingUrl'],
  'voice/recording': ['CallSid', 'RecordingSid', 'RecordingStatus', 'RecordingUrl', 'RecordingDuration'],
  sms: ['MessageSid', 'From', 'To', 'Body', 'MessageStatus', 'SmsStatus'],
}
const STATUSES = ['initiated', 'ringing', 'in-progress', 'completed', 'busy', 'no-answer', 'canceled', 'failed', 'queued', 'sent', 'delivered', 'received', 'undelivered']

interface CallbackCase { name: (typeof CALLBACKS)[number]; query: string; ct: string | null; body: string | Uint8Array }

function callbackCase(w: World): fc.Arbitrary<CallbackCase> {
  const value = fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom(...w.parties, ...w.proxies) },
    { weight: 2, arbitrary: fc.constantFrom(...STATUSES, 'CA-1', 'SM-1', '61', '0', '-5', '99999999999') },
    { weight: 3, arbitrary: text },
  )
  const callId = fc.oneof(fc.constantFrom(...w.callIds), fc.uuid(), text.map(enc), fc.constantFrom('%00', '%zz'))
  return fc.constantFrom(...CALLBACKS).chain(name => {
    const fields = fc.oneof(
      { weight: 3, arbitrary: fc.record(Object.fromEntries(FIELDS[name].map(f => [f, value])), { requiredKeys: FIELDS[name].slice(0, 3) }) },
      { weight: 1, arbitrary: fc.dictionary(fc.oneof({ weight: 5, arbitrary: fc.constantFrom(...FIELDS[name]) }, { weight: 1, arbitrary: text }), value, { maxKeys: 7 }) },
    )
    const form = fields.map(f => formOf(f as Record<string, string>))
    const telnyx = fc.record({
      event: fc.constantFrom('message.received', 'message.sent', 'message.finalized', 'call.initiated', ''),
      id: fc.oneof(fc.uuid(), text), from: value, to: value, text, status: fc.oneof(fc.constantFrom('delivered', 'sent', 'delivery_failed', 'queued'), text),
    }).map(r => JSON.stringify({ data: { event_type: r.event, id: 'ev', payload: { id: r.id, from: { phone_number: r.from }, to: [{ phone_number: r.to, status: r.status }], text: r.text } } }))
    const body = fc.oneof(
      { weight: 6, arbitrary: form.map(b => ({ ct: 'application/x-www-form-urlencoded' as string | null, body: b as string | Uint8Array })) },
      { weight: name === 'sms' ? 6 : 0, arbitrary: fc.oneof(telnyx, wild.map(v => JSON.stringify(v) ?? '')).map(b => ({ ct: 'application/json' as string | null, body: b as string | Uint8Array })) },
      { weight: 1, arbitrary: fc.uint8Array({ maxLength: 200 }).map(b => ({ ct: 'application/x-www-form-urlencoded' as string | null, body: b as string | Uint8Array })) },
      { weight: 1, arbitrary: fc.tuple(
        fc.constantFrom('application/x-www-form-urlencoded', 'application/json', null),
        fc.constantFrom('CallSid=%00', 'CallSid=%zz&From=%', '\u0000', '{"data":{"payload":{"id":"\\u0000"}}}', '&&&=&=', `From=${'%2B'.repeat(300)}`),
      ).map(([ct, b]) => ({ ct, body: b as string | Uint8Array })) },
    )
    return fc.record({ name: fc.constant(name), query: fc.option(callId, { freq: 2 }).map(c => (c === null ? '' : `?callId=${c}`)), body })
      .map(r => ({ name: r.name, query: r.query, ct: r.body.ct, body: r.body.body }))
  })
}

/** encodeURIComponent, except that a lone surrogate (which it refuses) becomes invalid UTF-8. */
function enc(s: string): string {
  try {
    return encodeURIComponent(s)
  } catch {
    return [...s].map(ch => (/[\ud800-\udfff]/.test(ch) ? '%ED%A0%80' : encodeURIComponent(ch))).join('')
  }
}

/** A form body (encodeForm's output, but any text: a lone surrogate goes out as invalid UTF-8). */
function formOf(fields: Record<string, string>): string {
  return Object.entries(fields).map(([k, v]) => `${enc(k)}=${enc(v)}`).join('&')
}

function numbersIn(s: string): string[] {
  return (s.match(E164_RE) ?? []).filter(n => !POOL_RE.test(n))
}

const PARTY_FIELDS = ['agentPhone', 'customerPhone', 'userPhone'] as const

/** The numbers a request names as parties (the fields of contract 2.2 / 4.7, as the harness does). */
function partyNumbersOf(url: string, body: string | Uint8Array | null): string[] {
  const out: string[] = []
  const q = new URL(url).searchParams
  for (const v of q.getAll('userPhone')) out.push(...numbersIn(v))
  if (typeof body === 'string') {
    try {
      const parsed = JSON.parse(body) as unknown
      if (parsed && typeof parsed === 'object') {
        for (const k of PARTY_FIELDS) {
          const v = (parsed as Record<string, unknown>)[k]
          if (typeof v === 'string') out.push(...numbersIn(v))
        }
      }
    } catch { /* not JSON: names no party */ }
  }
  return out
}

async function fuzzSetup(t: Test) {
  let now = Date.now()
  const api = await startTestService(t, { now: () => now, env: { WEBHOOK_ALLOW_INSECURE: 'false', LOG_LEVEL: 'info' } })
  const acct = await api.signup()
  // A tier whose per-minute limit the fuzz does not exhaust in one simulated minute.
  await api.svc.db.pool.query(sql.unsafe`UPDATE tenants SET tier = 'ENTERPRISE' WHERE id = ${acct.tenantId}`)
  const creds = { apiKey: acct.apiKey, apiSecret: acct.apiSecret }
  const tokens = { tenant: '', owner: '' }
  async function renew() {
    for (let i = 0; i < 5; i++) {
      const tok = await api.req('POST', '/v1/auth/token', { body: creds })
      const own = await api.req('POST', '/v1/auth/dashboard/login', { body: { email: acct.email, password: acct.password } })
      if (tok.status === 200 && own.status === 200) {
        tokens.tenant = tok.body.accessToken
        tokens.owner = own.body.accessToken
        api.secrets.add(tokens.tenant)
        api.secrets.add(tokens.owner)
        return
      }
      now += 61_000
    }
    throw new Error('cannot renew the test tokens')
  }
  await renew()
  const w: World = { ids: [], callIds: [], proxies: [], parties: [] }
  for (let i = 1; i <= 4; i++) w.parties.push(api.phone(i))
  for (const [a, b] of [[1, 2], [3, 4]] as const) {
    const s = await api.req('POST', '/v1/sessions', { token: tokens.tenant, body: { agentPhone: api.phone(a), customerPhone: api.phone(b) } })
    if (s.status !== 201) throw new Error(`session create: ${s.status} ${s.text}`)
    w.ids.push(s.body.id)
    w.proxies.push(s.body.proxyNumber)
    const xml = await api.req('POST', '/v1/webhooks/cpaas/voice', { raw: encodeForm({ CallSid: `CA-seed-${a}`, From: api.phone(a), To: s.body.proxyNumber }), headers: { 'content-type': 'application/x-www-form-urlencoded' } })
    const callId = /callId=([0-9a-f-]{36})/.exec(xml.text)?.[1]
    if (callId) w.callIds.push(callId)
  }
  let cases = 0
  async function tick() {
    if (++cases % CASES_PER_MINUTE === 0) {
      now += 61_000
      await renew()
    }
  }
  let checked = 0
  /** Log lines since the last call that say something failed behind an answer. */
  function failuresLogged(): string[] {
    const lines = api.logLines.slice(checked)
    checked = api.logLines.length
    return lines.filter(l => {
      const { level, code, msg } = JSON.parse(l) as { level: number; code?: unknown; msg?: string }
      if (msg === 'request failed') return false // the line of a 5xx answer: judged by the answer checks
      return level >= 50 || (typeof code === 'string' && /^(22|23|42)[0-9A-Z]{3}$/.test(code))
    })
  }
  return { api, w, tokens, creds, tick, failuresLogged }
}

/** The 5xx answers the API documents: no proxy number left (contract 7), provisioning not offered (docs/api.md). */
function documented5xx(op: Op, status: number, text: string): boolean {
  return (status === 503 && text.includes('/errors/pool-exhausted')) || (status === 501 && op.path === '/v1/numbers/provision')
}

const UNSIGNED = 'eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJzdWIiOiJ4IiwidHlwIjoidGVuYW50In0.'

function describe(method: string, url: string, status: number, text: string): string {
  return `${method} ${url.slice(0, 200)} → ${status} ${text.slice(0, 300)}`
}

t.test(`fuzz: ${REST_RUNS} requests over every OpenAPI operation`, async t => {
  const { api, w, tokens, creds, tick, failuresLogged } = await fuzzSetup(t)
  const doc = (await api.req('GET', '/v1/openapi.json')).body as Json
  const ops: Op[] = []
  for (const [path, methods] of Object.entries(doc.paths as Record<string, Record<string, Json>>)) {
    for (const [method, op] of Object.entries(methods)) {
      const content = op.requestBody?.content as Json | undefined
      if (content?.['*/*']) continue // provider callbacks: the second property
      ops.push({
        method: method.toUpperCase(), path, auth: op['x-maskline-auth']?.token ?? null,
        pathParams: (op.parameters ?? []).filter((p: Json) => p.in === 'path').map((p: Json) => p.name),
        query: (op.parameters ?? []).filter((p: Json) => p.in === 'query').map((p: Json) => ({ name: p.name, schema: p.schema })),
        body: content?.['application/json']?.schema ?? null,
      })
    }
  }
  t.ok(ops.length >= 30, `${ops.length} operations`)
  const seen = new Map<string, number>()
  const statuses = new Map<number, number>()
  // Password endpoints hash (hundreds of ms each): drawn less often, still every run.
  const weighted = ops.map(op => ({ weight: /\/auth\/(signup|dashboard)/.test(op.path) ? 1 : 4, arbitrary: restCase(op, w) }))
  await fc.assert(fc.asyncProperty(fc.oneof(...weighted), async c => {
    await tick()
    let i = 0
    const path = c.op.path.replace(/\{[^}]+\}/g, () => c.params[i++]!)
    const url = `${api.url}${path}${c.query ? `?${c.query}` : ''}`
    const headers: Record<string, string> = {}
    const token = c.auth === 'tenant' ? tokens.tenant : c.auth === 'owner' ? tokens.owner : c.auth === 'garbage' ? 'not.a.jwt' : c.auth === 'unsigned' ? UNSIGNED : null
    if (token) headers.authorization = `Bearer ${token}`
    if (c.body.ct) headers['content-type'] = c.body.ct
    const hasBody = c.op.method !== 'GET' && c.body.data !== null
    const r = await fetch(url, { method: c.op.method, headers, ...(hasBody ? { body: c.body.data as string | Uint8Array } : {}) })
    const text = await r.text()
    const what = describe(c.op.method, url, r.status, text)
    seen.set(`${c.op.method} ${c.op.path}`, (seen.get(`${c.op.method} ${c.op.path}`) ?? 0) + 1)
    statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1)
    if (c.op.path === '/v1/auth/rotate-key' && r.status === 200) Object.assign(creds, JSON.parse(text)) // keep our key working
    if (r.status >= 500 && !documented5xx(c.op, r.status, text)) throw new Error(`5xx: ${what}`)
    if (r.status >= 400 && !(r.status === 501 && documented5xx(c.op, r.status, text))) { // the 501 is `{error}` (contract 7.2)
      if (!/^application\/problem\+json/.test(r.headers.get('content-type') ?? '')) throw new Error(`not a problem document: ${what}`)
      const p = JSON.parse(text) as Json
      if (p.status !== r.status || !/^[a-z]+:\/\/.+\/errors\/[a-z-]+$/.test(p.type) || !/^urn:maskline:err:/.test(p.instance)) throw new Error(`malformed problem: ${what}`)
    }
    for (const n of [...partyNumbersOf(url, c.body.data), ...w.parties]) if (text.includes(n)) throw new Error(`a party number in the answer: ${what}`)
    const failed = failuresLogged()
    if (failed.length) throw new Error(`failed behind the answer: ${what}\n${failed.join('')}`)
  }), { numRuns: REST_RUNS, ...(SEED !== undefined ? { seed: SEED } : {}), endOnFailure: true })
  await new Promise(r => setTimeout(r, 1_000)) // the write-behind settles
  t.same(failuresLogged(), [], 'nothing failed behind an answer')
  // Drawn at random: with the default runs every operation comes up many times over.
  if (REST_RUNS >= 1_000) t.same(ops.filter(op => !seen.has(`${op.method} ${op.path}`)).map(op => `${op.method} ${op.path}`), [], 'every operation was fuzzed')
  t.comment(`statuses: ${[...statuses].sort((a, b) => a[0] - b[0]).map(([s, n]) => `${s}×${n}`).join(' ')}`)
})

t.test(`fuzz: ${CALLBACK_RUNS} provider callbacks`, async t => {
  const { api, w, tick, failuresLogged } = await fuzzSetup(t)
  const statuses = new Map<number, number>()
  await fc.assert(fc.asyncProperty(callbackCase(w), async c => {
    await tick()
    const url = `${api.url}/v1/webhooks/cpaas/${c.name}${c.query}`
    const r = await fetch(url, { method: 'POST', headers: c.ct ? { 'content-type': c.ct } : {}, body: c.body })
    const text = await r.text()
    const what = describe('POST', url, r.status, text)
    statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1)
    const callId = /callId=([0-9a-f-]{36})/.exec(text)?.[1]
    if (callId && UUID_RE.test(callId) && w.callIds.length < 50) w.callIds.push(callId)
    if (r.status >= 500) throw new Error(`5xx: ${what}`)
    if (r.status >= 400) {
      const ct = r.headers.get('content-type') ?? ''
      const refusal = c.name === 'sms' ? text === '{"ok":false}' : text === '<?xml version="1.0" encoding="UTF-8"?><Response/>'
      if (!(/^application\/problem\+json/.test(ct) || ((r.status === 400 || r.status === 403) && refusal))) throw new Error(`not a refusal answer: ${what}`)
    }
    // Records are written just behind the answer: give the group commit its moment.
    await new Promise(r => setTimeout(r, 2))
    const failed = failuresLogged()
    if (failed.length) throw new Error(`failed behind the answer: ${what}\n${failed.join('')}`)
  }), { numRuns: CALLBACK_RUNS, ...(SEED !== undefined ? { seed: SEED } : {}), endOnFailure: true })
  await new Promise(r => setTimeout(r, 1_000))
  t.same(failuresLogged(), [], 'nothing failed behind an answer')
  t.pass('no 5xx, every refusal in its form')
  t.comment(`statuses: ${[...statuses].sort((a, b) => a[0] - b[0]).map(([s, n]) => `${s}×${n}`).join(' ')}`)
})
