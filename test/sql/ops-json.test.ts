// sql/record-ops.ts opsJson: the journal line's operations (sql/journal.ts) are the JSON of the
// batch, whichever way they were written: each call's events through the text cache it shares
// with the batch statement, every other operation as JSON.stringify gives it. A replay parses
// exactly what the writer was asked to apply.
import t from 'tap'
import { callEnvelope, newEnvelope } from '../../sql/vocabulary/event-envelope.js'
import { opsJson, type OpData } from '../../sql/record-ops.js'

const at = Date.UTC(2026, 10, 26, 10, 0, 0, 7)
const call = (n: number, events: boolean): OpData => {
  const row = { id: `0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a${n}0`, sessionId: '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b', tenantId: '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c',
    providerCallId: `CA-"${n}"\\`, status: 'RINGING' as const, direction: 'A_TO_B' as const, initiatedAt: at + n, partyBHash: 'ab'.repeat(32), proxy: '+15550001111' }
  const data = { sessionId: row.sessionId, tenantId: row.tenantId, proxyNumber: '+15550001111', callId: row.id, direction: 'A_TO_B', status: 'RINGING', durationSeconds: 0 }
  return events
    ? { kind: 'call', row, events: [callEnvelope('call.incoming', at + n, data), callEnvelope('call.failed', at + n, { ...data, status: 'FAILED' })] }
    : { kind: 'call', row }
}

t.test('the JSON of the operations, key for key, events written once', async t => {
  const ops: OpData[] = [
    call(1, true),
    { kind: 'call-event', cb: { key: { callId: '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a10' }, source: 'status', value: 'completed', at, duration: 61 } },
    call(2, false),
    { kind: 'sms-status', forwardId: 'fw-1', status: 'DELIVERED', deliveredAt: null },
    { kind: 'sms-forward', id: 'sm-1', forwardId: null, status: 'FAILED', at, effects: { events: [newEnvelope('sms.sent', at, { tenantId: 't', sessionId: 's', smsId: 'sm-1', status: 'FAILED' })] } },
    call(3, true),
    { kind: 'call', row: (call(4, false) as Extract<OpData, { kind: 'call' }>).row, events: 'start' }, // CALL_START: the line holds the row alone
  ]
  t.equal(opsJson(ops), JSON.stringify(ops))
  t.equal(opsJson(ops), JSON.stringify(ops), 'again, the events from the cache')
  t.equal(opsJson([]), '[]')
})
