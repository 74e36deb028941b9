// sql/errors.ts is the one SQLSTATE → slug map (style 4): driver messages never reach callers.
import t from 'tap'
import { StoreError, toStoreError, withRetry } from '../../sql/errors.js'

const pgError = (code: string, extra: Record<string, unknown> = {}) =>
  Object.assign(new Error('duplicate key value violates unique constraint "x" Key (party_hash)=(abc…)'), { code, ...extra })

t.test('SQLSTATEs map to slugs, constraint names refine them', async t => {
  const cases: [unknown, string, string][] = [
    [pgError('23505', { constraint: 'session_participants_pkey' }), 'proxy-conflict', '23505'],
    [pgError('23505', { constraint: 'users_email_key' }), 'conflict', '23505'],
    [pgError('23503'), 'not-found', '23503'],
    [pgError('23514'), 'validation', '23514'],
    [pgError('22P02'), 'validation', '22P02'],
    [pgError('40001'), 'retryable', '40001'],
    [pgError('40P01'), 'retryable', '40P01'],
    [pgError('57P01'), 'unavailable', '57P01'],
    [pgError('08006'), 'unavailable', '08006'],
    [pgError('53300'), 'unavailable', '53300'],
    [pgError('42P01'), 'internal', '42P01'],
    // slonik wraps the pg error in `cause`
    [Object.assign(new Error('Query violates a unique integrity constraint.'), { cause: pgError('23505', { constraint: 'session_participants_pkey' }) }), 'proxy-conflict', '23505'],
    [Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }), 'unavailable', 'ECONNREFUSED'],
    [new Error('Connection terminated unexpectedly'), 'unavailable', 'connection'],
    [new Error('something else'), 'internal', 'unknown'],
  ]
  for (const [err, slug, code] of cases) {
    const e = toStoreError(err)
    t.match(e, { slug, code }, `${code} → ${slug}`)
    t.notMatch(e.message, /duplicate|Key|127\.0\.0\.1|terminated/, 'no driver text')
  }
  t.equal(toStoreError(pgError('23505', { constraint: 'session_participants_pkey' })).constraint, 'session_participants_pkey')
  const same = new StoreError('conflict', '23505')
  t.equal(toStoreError(same), same)
})

t.test('withRetry retries serialization failures and deadlocks, boundedly', async t => {
  let calls = 0
  t.equal(await withRetry(async () => {
    if (++calls < 3) throw pgError(calls === 1 ? '40001' : '40P01')
    return 'done'
  }, { baseDelayMs: 1 }), 'done')
  t.equal(calls, 3)

  calls = 0
  await t.rejects(withRetry(async () => { calls++; throw pgError('40001') }, { attempts: 3, baseDelayMs: 1 }), { slug: 'retryable', code: '40001' })
  t.equal(calls, 3, 'gives up after the bound')

  calls = 0
  await t.rejects(withRetry(async () => { calls++; throw pgError('23505') }, { baseDelayMs: 1 }), { slug: 'conflict', code: '23505' })
  t.equal(calls, 1, 'other failures are not retried')
})
