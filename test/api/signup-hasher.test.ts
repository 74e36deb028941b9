// Logins before signups on the CPU too (api/auth/signup-hasher.ts): a new account's password is
// hashed on a worker thread that lowered its own priority to nice 19, so a login's check (libuv's
// thread pool, at the process's priority) gets a core first on a busy machine. Linux: a thread's
// nice value is read from /proc/self/task/<tid>/stat (field 19).
import t from 'tap'
import { readdirSync, readFileSync } from 'node:fs'
import { hashPassword, verifyPassword } from '../../api/auth/passwords.js'
import { signupWorkersNiced } from '../../api/auth/signup-hasher.js'

const niceOf = (stat: string) => Number(stat.split(') ')[1]!.split(' ')[16])
const threadNices = () => readdirSync('/proc/self/task').map(tid => niceOf(readFileSync(`/proc/self/task/${tid}/stat`, 'utf8')))

t.test('a signup hashes on a thread at nice 19; the event loop and the checks keep their priority', async t => {
  t.ok(threadNices().every(n => n === 0), 'no thread lowered before the first signup')
  const stored = await hashPassword('correct horse battery') // the signup lane
  t.same(signupWorkersNiced(), [true], 'one signup worker, which lowered its own priority')
  const nices = threadNices()
  t.equal(nices.filter(n => n === 19).length, 1, 'exactly one thread at nice 19')
  t.ok(nices.every(n => n === 19 || n === 0), 'every other thread at 0')
  t.equal(niceOf(readFileSync('/proc/self/stat', 'utf8')), 0, 'the main thread at 0')
  t.ok(await verifyPassword('correct horse battery', stored), 'a check (thread pool) verifies the worker\'s hash')
  t.notOk(await verifyPassword('wrong horse battery', stored))
  t.same(signupWorkersNiced(), [true], 'checks start no worker')
})

t.test('the worker hashes signup after signup, each with its own salt', async t => {
  // One after another: signups queued together wait at most SIGNUP_MAX_WAIT_MS (a slow machine refuses the third).
  const passwords = ['first password', 'second password', 'third password']
  const stored: string[] = []
  for (const p of passwords) stored.push(await hashPassword(p))
  t.same(signupWorkersNiced(), [true], 'the same worker')
  t.equal(new Set(stored).size, 3, 'three salts, three hashes')
  for (let i = 0; i < 3; i++) t.ok(await verifyPassword(passwords[i]!, stored[i]!), `hash ${i} verifies`)
})
