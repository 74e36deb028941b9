// The allow-list serializer (style 5): only declared properties, recursively, whatever the
// handler hands it.
import t from 'tap'
import { Type } from '@sinclair/typebox'
import { compilePicker } from '../../gateway/http/serialize.js'
import { checker } from '../../gateway/http/compile.js'
import { Envelope, Nullable, StringEnum, TenantView } from '../../api/schemas/common.js'

const pick = (schema: Parameters<typeof compilePicker>[0]) => compilePicker(schema, checker)
const PHONE = '+12025550177'

t.test('objects keep declared properties only, at every depth', async t => {
  const p = pick(Type.Object({ a: Type.String(), b: Type.Optional(Type.Object({ c: Type.Integer() })), list: Type.Array(Type.Object({ d: Type.Boolean() })) }))
  t.same(p({ a: 'x', agentPhone: PHONE, b: { c: 1, customerPhone: PHONE }, list: [{ d: true, e: PHONE }] }), { a: 'x', b: { c: 1 }, list: [{ d: true }] })
  t.same(p({ a: 'x', list: [] }), { a: 'x', list: [] }, 'absent optionals stay absent')
})

t.test('a primitive slot never carries an object', async t => {
  const p = pick(Type.Object({ at: Type.String(), who: Type.String(), n: Nullable(Type.String()) }))
  t.same(p({ at: new Date(Date.UTC(2026, 0, 1)), who: { phone: PHONE }, n: null }), { at: '2026-01-01T00:00:00.000Z', n: null })
})

t.test('records and free-form objects are copied as declared', async t => {
  const p = pick(Type.Object({ metadata: Type.Record(Type.String(), Type.Union([Type.String(), Type.Number()])), extra: Type.Object({}, { additionalProperties: true }) }))
  t.same(p({ metadata: { order: 'A1', n: 2 }, extra: { deep: { x: 1 } } }), { metadata: { order: 'A1', n: 2 }, extra: { deep: { x: 1 } } })
})

t.test('unions pick the matching variant; intersections merge', async t => {
  const u = pick(Type.Union([Type.Object({ ok: Type.Literal(true), id: Type.String() }), Type.Object({ ok: Type.Literal(false) })]))
  t.same(u({ ok: true, id: 'a', phone: PHONE }), { ok: true, id: 'a' })
  t.same(u({ ok: false, id: 'a' }), { ok: false })
  t.same(u({ ok: 'neither', id: 'a', phone: PHONE }), { ok: 'neither', id: 'a' }, 'no variant matches: still an allow-list')
  const i = pick(Type.Intersect([Type.Object({ a: Type.String() }), Type.Object({ b: Type.String() })]))
  t.same(i({ a: '1', b: '2', c: PHONE }), { a: '1', b: '2' })
  const c = pick(Type.Composite([Type.Object({ a: Type.String() }), Type.Object({ b: Type.String() })]))
  t.same(c({ a: '1', b: '2', c: PHONE }), { a: '1', b: '2' })
})

t.test('envelopes and the tenant view', async t => {
  const e = pick(Envelope(Type.Object({ id: Type.String(), state: StringEnum(['A', 'B']) })))
  t.same(e({ data: [{ id: '1', state: 'A', customerPhone: PHONE }], pagination: { count: 1, after: null, cursorSecret: 'x' } }),
    { data: [{ id: '1', state: 'A' }], pagination: { count: 1, after: null } })
  const v = pick(TenantView)
  const out = v({ id: 'x', name: 'n', salt: Buffer.alloc(32), live_sessions: 3, pushConfig: { a: 1 } }) as Record<string, unknown>
  t.same(out, { id: 'x', name: 'n', pushConfig: { a: 1 } })
})
