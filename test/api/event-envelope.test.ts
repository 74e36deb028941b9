// sql/vocabulary/event-envelope.ts: callEnvelope, the voice path's builder, gives the envelope
// newEnvelope gives for the same call fields (same JSON text, key order included), and copies
// only the fields contract D6 names for call events, whatever else its argument carries.
import t from 'tap'
import { buildEnvelope, callEnvelope, type CallEventData } from '../../sql/vocabulary/event-envelope.js'

const data: CallEventData = {
  sessionId: '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b', tenantId: '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c',
  proxyNumber: '+15550001111', callId: '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5d', direction: 'B_TO_A', status: 'COMPLETED', durationSeconds: 61,
}

t.test('the same envelope as the generic builder, key for key', async t => {
  const at = Date.UTC(2026, 10, 26, 9, 30, 0, 123)
  for (const type of ['call.incoming', 'call.answered', 'call.ended', 'call.failed'] as const) {
    const before = Date.now()
    const fast = callEnvelope(type, at, data)
    t.equal(JSON.stringify(fast), JSON.stringify(buildEnvelope(fast.id, type, at, data)), type)
    t.equal(fast.createdAt, '2026-11-26T09:30:00.123Z')
    // Minted as it is written, not at `at`: ids follow commit order (gateway/stream/settle.ts).
    const idMs = parseInt(fast.id.slice(0, 8) + fast.id.slice(9, 13), 16)
    t.ok(idMs >= before && idMs <= Date.now() + 5, 'a UUIDv7 of the time it was minted')
  }
})

t.test('only the named call fields reach the envelope', async t => {
  const extra = { ...data, agentPhone: '+15551234567', text: 'hello' } as CallEventData
  const e = callEnvelope('call.incoming', Date.now(), extra)
  t.same(Object.keys(e.data), ['sessionId', 'tenantId', 'proxyNumber', 'callId', 'direction', 'status', 'durationSeconds'])
  t.notMatch(JSON.stringify(e), /5551234567|hello/)
})
