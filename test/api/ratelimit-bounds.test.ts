// api/rate-limit/memory.ts: the single-node limiter's keys are bounded by count (a flood of
// distinct keys within one window) and by time (idle keys swept), docs/memory-bounds.md.
import t from 'tap'
import { createMemoryRateLimiter } from '../../api/rate-limit/memory.js'

t.test('distinct keys flooding one window: never more than maxKeys, and recent keys keep their count', async t => {
  let now = 0
  const l = createMemoryRateLimiter({ now: () => now, maxKeys: 1_000 })
  let most = 0
  for (let i = 0; i < 20_000; i++) {
    now = i // 20 s: all within one 60 s window, nothing idle to sweep
    await l.hit(`login-ip:${i}`, 5)
    most = Math.max(most, l.size)
  }
  t.ok(most <= 1_000, `at most ${most} keys`)
  t.ok(l.size >= 900, `the newest are kept (${l.size})`)
  for (let k = 0; k < 4; k++) await l.hit('login-ip:19999', 5)
  t.equal((await l.hit('login-ip:19999', 5)).allowed, false, 'a key kept its window: the 6th hit of a 5 a minute limit is refused')
})

t.test('idle keys are swept once their window has passed (fake clock)', async t => {
  let now = 0
  const l = createMemoryRateLimiter({ now: () => now, sweepEvery: 100 })
  for (let i = 0; i < 5_000; i++) await l.hit(`tenant:${i}`, 10)
  t.equal(l.size, 5_000)
  now = 60_001
  for (let i = 0; i < 100; i++) await l.hit('tenant:busy', 1_000)
  t.equal(l.size, 1, 'only the key used in the last window is left')
})
