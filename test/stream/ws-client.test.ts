// The test client's frame codec (test/support/ws-client.ts): the stream tests and the fan-out
// bench trust what it parses.
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { createFrameParser, encodeFrame } from '../support/ws-client.js'

t.test('frame codec round-trips short, 16-bit and 64-bit lengths, masked or not', async t => {
  for (const size of [0, 5, 125, 126, 65535, 65536, 70000]) {
    for (const mask of [false, true]) {
      const payload = randomBytes(size)
      const got: Array<[boolean, number, Buffer]> = []
      const parse = createFrameParser((fin, op, p) => got.push([fin, op, Buffer.from(p)]))
      const frame = encodeFrame(0x1, payload, mask)
      // fed in awkward pieces to exercise the incremental parser
      const step = Math.max(7, Math.ceil(frame.length / 32))
      for (let i = 0; i < frame.length; i += step) parse(frame.subarray(i, i + step))
      t.equal(got.length, 1, `size ${size} mask ${mask}`)
      t.ok(got[0]![0])
      t.equal(got[0]![1], 1)
      t.ok(got[0]![2].equals(payload))
    }
  }
})

t.test('several frames in one chunk', async t => {
  const got: string[] = []
  const parse = createFrameParser((_fin, _op, p) => got.push(p.toString()))
  parse(Buffer.concat(['a', 'bb', 'ccc'].map(s => encodeFrame(0x1, Buffer.from(s), false))))
  t.same(got, ['a', 'bb', 'ccc'])
})
