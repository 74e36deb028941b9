// gateway/stream/resume.ts paces a replay by the socket: while uWS holds more than a page's worth
// of the socket's frames unsent, no further page is read; the drain callback resumes it. A fake
// socket stands for uWS here (its buffered amount is the test's to set), the source is in memory.
import t from 'tap'
import { createResume, type ReplaySource, type ResumeSocket } from '../../gateway/stream/resume.js'

const sleep = (ms: number) => new Promise(r => setTimeout(r, ms))

t.test('no page is read while the socket is above its low water; the drain resumes the replay', async t => {
  const tenantId = '01900000-0000-7000-8000-000000000001'
  const base = Date.now() - 60_000
  const id = (n: number) => {
    const h = (base + n).toString(16).padStart(12, '0')
    return `${h.slice(0, 8)}-${h.slice(8)}-7000-8000-${n.toString(16).padStart(12, '0')}`
  }
  const rows = Array.from({ length: 2_000 }, (_, n) => ({ id: id(n + 1), json: `{"n":${n + 1}}` }))
  let reads = 0
  const source: ReplaySource = {
    exists: async () => true,
    page: async q => { reads++; return rows.filter(r => r.id > q.afterId && r.id < q.beforeId).slice(0, q.limit) },
  }
  let buffered = 0
  const sent: string[] = []
  let live = false
  const ws: ResumeSocket = {
    sendAll(frames) { sent.push(...frames); buffered += frames.reduce((n, f) => n + f.length, 0) * 1_000 },
    buffered: () => buffered,
    end() { t.fail('closed') },
    goLive() { live = true },
    isClosed: () => false,
  }
  const r = createResume(ws, tenantId, id(0), null, { source, settleMs: 100, windowMs: 3_600_000, now: Date.now, onError: err => t.error(err) })
  const done = r.run()
  await sleep(200)
  t.equal(reads, 1, 'one page read, then the replay waits for the socket')
  t.equal(sent.length, 500)
  buffered = 0
  r.drained()
  await sleep(200)
  t.equal(reads, 2, 'the drain let exactly one more page through')
  for (let i = 0; i < 10 && !live; i++) { buffered = 0; r.drained(); await sleep(50) }
  await done
  t.ok(live, 'the replay reached the live feed')
  t.same(sent, rows.map(x => x.json), 'every row once, in order')
})
