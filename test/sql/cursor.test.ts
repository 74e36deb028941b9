// List cursors (contract D7): our `<ISO>_<uuid>` cursors and the contract's bare timestamps.
import t from 'tap'
import { decodeTimeCursor, encodeTimeCursor } from '../../sql/cursor.js'

const id = '0194f0a0-0000-7000-8000-000000000001'

t.test('round trip and accepted timestamp forms', async t => {
  const ms = Date.UTC(2026, 0, 15, 12, 0, 0, 123)
  t.equal(encodeTimeCursor(ms, id), `2026-01-15T12:00:00.123Z_${id}`)
  t.same(decodeTimeCursor(encodeTimeCursor(ms, id)), { ms, id })
  t.same(decodeTimeCursor('2026-01-15T12:00:00.123Z'), { ms, id: null })
  t.same(decodeTimeCursor('2026-01-15T13:00:00.123456+01:00'), { ms, id: null }, 'offsets; digits past ms dropped')
  t.same(decodeTimeCursor('2026-01-15T12:00:00.123'), { ms, id: null }, 'no offset means UTC')
  t.same(decodeTimeCursor('2026-01-15'), { ms: Date.UTC(2026, 0, 15), id: null })
})

t.test('anything else is refused', async t => {
  for (const bad of ['', 'yesterday', '1', '2026-13-45T00:00:00Z', `2026-01-15T12:00:00Z_nope`, `2026-01-15T12:00:00Z_${id}_x`, id]) {
    t.equal(decodeTimeCursor(bad), null, JSON.stringify(bad))
  }
})
