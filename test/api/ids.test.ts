// sql/vocabulary/ids.ts: every id is a UUIDv7 (contract D2, RFC 9562) whose first 48 bits are the
// millisecond it was minted for, version 7, variant 10, a counter in rand_a that keeps ids of one
// millisecond in order (and carries into the next one past 4,095), random bits in rand_b; ids of a
// process never go backwards, even when the clock does.
import t from 'tap'
import { UUID_RE, uuidv7 } from '../../sql/vocabulary/ids.js'

const T = 1_795_813_412_260
const fields = (id: string) => {
  const hex = id.replaceAll('-', '')
  return {
    ms: parseInt(hex.slice(0, 12), 16),
    version: parseInt(hex[12]!, 16),
    seq: parseInt(hex.slice(13, 16), 16),
    variant: parseInt(hex[16]!, 16) >> 2,
    rand: hex.slice(17),
  }
}

t.test('layout: the millisecond, version 7, variant 10, dashes where RFC 9562 puts them', async t => {
  // Increasing: an id never goes behind the last one minted (see below).
  for (const ms of [T, T + 0xff, T + 0x10000, T + 0xffffffff, T + 2 ** 40 + 12345]) {
    const id = uuidv7(ms)
    t.match(id, UUID_RE)
    t.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, `lower-case hex, version and variant: ${id}`)
    const f = fields(id)
    t.equal(f.ms, ms, `the time field of ${ms}`)
    t.equal(f.version, 7)
    t.equal(f.variant, 2)
  }
})

t.test('ids of one millisecond count up; a clock stepped back mints after the last id', async t => {
  const at = T + 2 ** 41
  const ids = Array.from({ length: 100 }, () => uuidv7(at))
  t.same([...ids].sort(), ids, 'in order')
  t.equal(new Set(ids).size, ids.length, 'distinct')
  t.same(ids.map(id => fields(id).seq), ids.map((_, i) => i), 'the counter')
  t.ok(ids.every(id => fields(id).ms === at), 'all of that millisecond')
  const back = uuidv7(at - 5_000)
  t.ok(back > ids.at(-1)!, 'the clock went back, the id did not')
  t.equal(fields(back).ms, at)
  const later = uuidv7(at + 1)
  t.equal(fields(later).ms, at + 1)
  t.equal(fields(later).seq, 0, 'a new millisecond restarts the counter')
})

t.test('past 4,095 ids in a millisecond the counter carries into the next one', async t => {
  const at = T + 2 ** 41 + 10_000_000
  const ids = Array.from({ length: 4_100 }, () => uuidv7(at))
  t.same([...ids].sort(), ids, 'in order across the carry')
  t.equal(fields(ids[4_095]!).ms, at)
  t.equal(fields(ids[4_096]!).ms, at + 1)
  t.equal(fields(ids[4_096]!).seq, 0)
})

t.test('rand_b is random: no two ids share it, and every hex digit shows up in every position', async t => {
  const rands = Array.from({ length: 20_000 }, (_, i) => fields(uuidv7(T + 2 ** 41 + 20_000_000 + i)).rand)
  t.equal(new Set(rands).size, rands.length)
  for (let pos = 0; pos < 15; pos++) {
    const seen = new Set(rands.map(r => r[pos]))
    t.equal(seen.size, 16, `position ${pos} of rand_b`)
  }
  // The variant's two free bits are random too.
  t.same(new Set(Array.from({ length: 200 }, () => uuidv7(T + 2 ** 41 + 30_000_000)[19])), new Set(['8', '9', 'a', 'b']))
})

t.test('the last millisecond of the 48-bit field', async t => {
  const f = fields(uuidv7(2 ** 48 - 1))
  t.equal(f.ms, 2 ** 48 - 1)
  t.equal(f.version, 7)
})
