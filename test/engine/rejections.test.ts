// The engine's rejection slugs (style 4): contract section 7 names, listed once at runtime and as a type.
import t from 'tap'
import { REJECTIONS, type Rejection } from '../../engine/index.js'

t.test('the slugs are the contract 7 names the engine can produce', async t => {
  t.same([...REJECTIONS].sort(), [
    'invalid-target', 'not-found', 'pool-exhausted', 'proxy-in-use', 'proxy-unavailable', 'session-end-failed', 'target-conflict', 'tier-session-limit',
  ])
  // Type level: the array and the union are the same set.
  const all: readonly Rejection[] = REJECTIONS
  const exhaustive: Record<Rejection, true> = { 'not-found': true, 'session-end-failed': true, 'target-conflict': true, 'invalid-target': true, 'pool-exhausted': true, 'tier-session-limit': true, 'proxy-in-use': true, 'proxy-unavailable': true }
  t.equal(all.length, Object.keys(exhaustive).length)
})
