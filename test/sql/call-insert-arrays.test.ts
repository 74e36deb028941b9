// sql/record-apply.ts insertCalls sends a batch of call rows as one array literal per column
// (sql/transaction.ts arrayLiteral, unnested by Postgres): every column of every row must come
// back exactly as the record was given, whatever a provider's CallSid holds (quotes, backslashes,
// commas, braces, the word NULL, spaces, non-ASCII), with nulls and defaults where the record has
// none. Both backends: the embedded server parses the same literals.
import t from 'tap'
import { sql } from 'slonik'
import { uuidv7 } from '../../sql/vocabulary/ids.js'
import { applyOps } from '../../sql/record-apply.js'
import type { CallCache, OpData } from '../../sql/record-ops.js'
import { arrayLiteral } from '../../sql/transaction.js'
import { testDatabase } from '../support/db.js'
import { hashParty, liveSession, T0 } from './fixtures.js'

const noCache: CallCache = { get: () => undefined, bySid: () => undefined }
const rowOf = (op: OpData) => (op as Extract<OpData, { kind: 'call' }>).row

t.test('an array literal reads back as the values it was made of', async t => {
  const db = await testDatabase(t)
  const texts = ['plain', 'with "quotes"', 'back\\slash', 'a,b', '{braces}', 'NULL', ' padded ', 'été ☎', '', '\\"']
  t.same(await db.pool.anyFirst(sql.unsafe`SELECT unnest(${arrayLiteral(texts)}::text[]) AS v`), texts)
  t.same(await db.pool.anyFirst(sql.unsafe`SELECT unnest(${arrayLiteral(['x', null, 'NULL'])}::text[]) AS v`), ['x', null, 'NULL'])
  t.same(await db.pool.anyFirst(sql.unsafe`SELECT unnest(${arrayLiteral([0, 61, -3])}::int[]) AS v`), [0, 61, -3])
  t.same(await db.pool.anyFirst(sql.unsafe`SELECT unnest(${arrayLiteral([true, false])}::boolean[]) AS v`), [true, false])
  t.equal(arrayLiteral([]), '{}')
})

t.test('every column of a batch of calls is stored as given', async t => {
  const db = await testDatabase(t)
  const { tenant, rec } = await liveSession(db.pool, 61)
  const sids = ['CA-"quoted"', 'CA\\back', 'CA,comma', 'CA{brace}', 'NULL', 'CA é ☎ ']
  const ops: OpData[] = sids.map((sid, i) => ({
    kind: 'call',
    row: {
      id: uuidv7(T0 + i), sessionId: rec.id, tenantId: tenant.id, providerCallId: sid, direction: i % 2 === 0 ? 'A_TO_B' : 'B_TO_A',
      initiatedAt: T0 + i, partyBHash: hashParty(tenant.salt, rec.customerPhone), proxy: rec.proxyNumber,
      // Every other row is a refused call: FAILED, ended at once, with the consent flag set.
      ...(i % 2 === 0 ? { status: 'RINGING' as const } : { status: 'FAILED' as const, endedAt: T0 + i + 5, recordingConsentPlayed: true }),
    },
  }))
  const out = await applyOps(db.pool, ops, noCache)
  t.same(out.results, ops.map(op => rowOf(op).id), 'every row inserted')
  const stored = await db.pool.any(sql.unsafe`
    SELECT id, session_id, tenant_id, provider_call_id, status, direction, duration_seconds, initiated_at, answered_at,
           ended_at, recording_url, recording_duration_seconds, recording_consent_played, party_b_hash
    FROM call_records WHERE session_id = ${rec.id} ORDER BY id`)
  t.same(stored, ops.map(op => {
    const r = rowOf(op)
    return {
      id: r.id, session_id: r.sessionId, tenant_id: r.tenantId, provider_call_id: r.providerCallId, status: r.status, direction: r.direction,
      duration_seconds: 0, initiated_at: r.initiatedAt, answered_at: null, ended_at: r.endedAt ?? null, recording_url: null,
      recording_duration_seconds: null, recording_consent_played: r.recordingConsentPlayed ?? false, party_b_hash: r.partyBHash,
    }
  }))
  const again = await applyOps(db.pool, ops, noCache)
  t.same(again.results, out.results, 'a replay finds the same rows by CallSid and inserts nothing')
  t.equal(await db.pool.oneFirst(sql.unsafe`SELECT count(*)::int FROM call_records WHERE session_id = ${rec.id}`), sids.length)

  // One CallSid twice in a batch (a provider's retry beside a rebuild), beside a new one: the first
  // row goes in, both calls of it get its id, the new one its own.
  const twice = { ...rowOf(ops[0]!), id: uuidv7(T0 + 100), providerCallId: 'CA-twice', initiatedAt: T0 + 100 }
  const fresh = { ...rowOf(ops[0]!), id: uuidv7(T0 + 101), providerCallId: 'CA-fresh', initiatedAt: T0 + 101 }
  const mixed = await applyOps(db.pool, [
    { kind: 'call', row: twice }, { kind: 'call', row: { ...twice, id: uuidv7(T0 + 102) } }, { kind: 'call', row: fresh },
  ], noCache)
  t.same(mixed.results, [twice.id, twice.id, fresh.id])
  t.same(mixed.calls.map(c => c.id), [twice.id, fresh.id], 'the calls this batch inserted, each once')
})
