// contract D5 call status: RINGING → ANSWERED on in-progress; completed after answer or
// DialCallStatus=completed → COMPLETED; busy/no-answer/canceled → MISSED; failed → FAILED.
// Never backwards, duplicates ignored, terminal states final. The parent leg (the TeXML
// application's status callback) ends only a call that was never answered.
import t from 'tap'
import { applyCallStatus, billableMinutes, parseDurationSeconds, type CallStatusInput } from '../../engine/call-status.js'
import type { CallStatus } from '../../engine/types.js'

type Row = [CallStatus, CallStatusInput['source'], string, number | undefined, ReturnType<typeof applyCallStatus>]
const table: Row[] = [
  // intermediate statuses carry nothing new
  ['RINGING', 'status', 'initiated', undefined, null],
  ['RINGING', 'status', 'ringing', undefined, null],
  ['RINGING', 'status', 'queued', undefined, null],
  // answer
  ['RINGING', 'status', 'in-progress', undefined, { status: 'ANSWERED', event: 'call.answered' }],
  ['RINGING', 'status', 'answered', undefined, { status: 'ANSWERED', event: 'call.answered' }],
  ['ANSWERED', 'status', 'in-progress', undefined, null],
  // completion
  ['ANSWERED', 'status', 'completed', 95, { status: 'COMPLETED', event: 'call.ended', durationSeconds: 95 }],
  ['ANSWERED', 'dial-status', 'completed', 61, { status: 'COMPLETED', event: 'call.ended', durationSeconds: 61 }],
  ['RINGING', 'dial-status', 'completed', 30, { status: 'COMPLETED', event: 'call.ended', durationSeconds: 30 }],
  ['RINGING', 'dial-status', 'answered', 12, { status: 'COMPLETED', event: 'call.ended', durationSeconds: 12 }],
  ['ANSWERED', 'status', 'completed', undefined, { status: 'COMPLETED', event: 'call.ended', durationSeconds: 0 }],
  ['RINGING', 'status', 'completed', 40, { status: 'COMPLETED', event: 'call.ended', durationSeconds: 40 }],
  ['RINGING', 'status', 'completed', undefined, null],
  ['RINGING', 'status', 'completed', 0, null],
  // not reached
  ['RINGING', 'status', 'busy', undefined, { status: 'MISSED', event: 'call.ended', durationSeconds: 0 }],
  ['RINGING', 'status', 'no-answer', undefined, { status: 'MISSED', event: 'call.ended', durationSeconds: 0 }],
  ['RINGING', 'dial-status', 'canceled', undefined, { status: 'MISSED', event: 'call.ended', durationSeconds: 0 }],
  ['RINGING', 'dial-status', 'no-answer', undefined, { status: 'MISSED', event: 'call.ended', durationSeconds: 0 }],
  ['RINGING', 'status', 'failed', undefined, { status: 'FAILED', event: 'call.failed', durationSeconds: 0 }],
  ['RINGING', 'dial-status', 'failed', undefined, { status: 'FAILED', event: 'call.failed', durationSeconds: 0 }],
  // an answered call that reports a failure still ended as a bridged call
  ['ANSWERED', 'dial-status', 'failed', 20, { status: 'COMPLETED', event: 'call.ended', durationSeconds: 20 }],
  ['ANSWERED', 'status', 'canceled', 5, { status: 'COMPLETED', event: 'call.ended', durationSeconds: 5 }],
  // never backwards
  ['ANSWERED', 'status', 'ringing', undefined, null],
  ['ANSWERED', 'status', 'initiated', undefined, null],
  // parent leg: the caller hung up before anyone answered (e.g. during the consent prompt)
  ['RINGING', 'parent-status', 'completed', undefined, { status: 'MISSED', event: 'call.ended', durationSeconds: 0 }],
  ['RINGING', 'parent-status', 'completed', 12, { status: 'MISSED', event: 'call.ended', durationSeconds: 0 }],
  ['RINGING', 'parent-status', 'canceled', undefined, { status: 'MISSED', event: 'call.ended', durationSeconds: 0 }],
  ['RINGING', 'parent-status', 'failed', undefined, { status: 'FAILED', event: 'call.failed', durationSeconds: 0 }],
  // parent leg: in-progress only means the application answered to play the prompt
  ['RINGING', 'parent-status', 'in-progress', undefined, null],
  ['RINGING', 'parent-status', 'ringing', undefined, null],
  ['RINGING', 'parent-status', 'initiated', undefined, null],
  // parent leg after an answer: its duration counts the prompt, the Dial's callbacks decide
  ['ANSWERED', 'parent-status', 'completed', 80, null],
  ['ANSWERED', 'parent-status', 'canceled', undefined, null],
  ['ANSWERED', 'parent-status', 'failed', undefined, null],
  // unknown values
  ['RINGING', 'status', 'exploded', undefined, null],
  ['RINGING', 'parent-status', 'exploded', undefined, null],
  ['RINGING', 'status', '', undefined, null],
]

t.test('transition table', async t => {
  for (const [current, source, callStatus, duration, want] of table) {
    const input = duration === undefined ? { source, callStatus } : { source, callStatus, duration }
    t.same(applyCallStatus(current, input), want, `${current} + ${source}:${callStatus}${duration === undefined ? '' : ` (${duration}s)`}`)
  }
})

t.test('terminal states never change, whatever arrives', async t => {
  for (const current of ['COMPLETED', 'MISSED', 'FAILED'] as const) {
    for (const s of ['initiated', 'ringing', 'in-progress', 'completed', 'busy', 'no-answer', 'canceled', 'failed', 'answered']) {
      t.equal(applyCallStatus(current, { source: 'status', callStatus: s, duration: 10 }), null, `${current} + status:${s}`)
      t.equal(applyCallStatus(current, { source: 'dial-status', callStatus: s, duration: 10 }), null, `${current} + dial-status:${s}`)
      t.equal(applyCallStatus(current, { source: 'parent-status', callStatus: s, duration: 10 }), null, `${current} + parent-status:${s}`)
    }
  }
})

t.test('answeredSeen: a completed status counts when the answer was recorded earlier', async t => {
  t.same(applyCallStatus('RINGING', { source: 'status', callStatus: 'completed', answeredSeen: true, duration: 3 }),
    { status: 'COMPLETED', event: 'call.ended', durationSeconds: 3 })
  t.same(applyCallStatus('RINGING', { source: 'status', callStatus: 'busy', answeredSeen: true }),
    { status: 'COMPLETED', event: 'call.ended', durationSeconds: 0 })
  t.equal(applyCallStatus('RINGING', { source: 'parent-status', callStatus: 'completed', answeredSeen: true }), null,
    'an answered call is not missed because the caller hung up')
})

t.test('case and whitespace are tolerated; bad durations count as 0', async t => {
  t.same(applyCallStatus('RINGING', { source: 'status', callStatus: ' In-Progress ' }), { status: 'ANSWERED', event: 'call.answered' })
  t.same(applyCallStatus('ANSWERED', { source: 'status', callStatus: 'completed', duration: Number.NaN }), { status: 'COMPLETED', event: 'call.ended', durationSeconds: 0 })
  t.same(applyCallStatus('ANSWERED', { source: 'status', callStatus: 'completed', duration: -4 }), { status: 'COMPLETED', event: 'call.ended', durationSeconds: 0 })
  t.same(applyCallStatus('ANSWERED', { source: 'status', callStatus: 'completed', duration: 7.9 }), { status: 'COMPLETED', event: 'call.ended', durationSeconds: 7 })
})

/** Folds a sequence of callbacks as the handler would: persist only on a change. */
function run(events: Array<{ source: CallStatusInput['source']; callStatus: string; duration?: number }>) {
  let status: CallStatus = 'RINGING'
  const emitted: string[] = []
  for (const e of events) {
    const r = applyCallStatus(status, e)
    if (r) { status = r.status; if (r.event) emitted.push(r.event) }
  }
  return { status, emitted }
}

t.test('sequences: normal, duplicated and out of order', async t => {
  t.same(run([
    { source: 'status', callStatus: 'initiated' }, { source: 'status', callStatus: 'ringing' },
    { source: 'status', callStatus: 'in-progress' }, { source: 'status', callStatus: 'completed', duration: 70 },
    { source: 'dial-status', callStatus: 'completed', duration: 70 },
  ]), { status: 'COMPLETED', emitted: ['call.answered', 'call.ended'] }, 'normal call: one event each')

  t.same(run([
    { source: 'status', callStatus: 'in-progress' }, { source: 'status', callStatus: 'in-progress' },
    { source: 'dial-status', callStatus: 'completed', duration: 10 }, { source: 'dial-status', callStatus: 'completed', duration: 10 },
  ]), { status: 'COMPLETED', emitted: ['call.answered', 'call.ended'] }, 'replays change nothing twice')

  t.same(run([
    { source: 'status', callStatus: 'completed' }, { source: 'status', callStatus: 'in-progress' },
    { source: 'status', callStatus: 'ringing' }, { source: 'dial-status', callStatus: 'completed', duration: 33 },
  ]), { status: 'COMPLETED', emitted: ['call.answered', 'call.ended'] }, 'completed before in-progress waits for the dial-status')

  t.same(run([
    { source: 'dial-status', callStatus: 'no-answer' }, { source: 'status', callStatus: 'in-progress' },
    { source: 'status', callStatus: 'completed', duration: 3 },
  ]), { status: 'MISSED', emitted: ['call.ended'] }, 'late callbacks after a terminal state are ignored')

  t.same(run([
    { source: 'parent-status', callStatus: 'in-progress' }, { source: 'parent-status', callStatus: 'completed', duration: 6 },
    { source: 'parent-status', callStatus: 'completed', duration: 6 },
  ]), { status: 'MISSED', emitted: ['call.ended'] }, 'caller hangs up during the consent prompt: missed, once')

  t.same(run([
    { source: 'parent-status', callStatus: 'in-progress' }, { source: 'status', callStatus: 'in-progress' },
    { source: 'parent-status', callStatus: 'completed', duration: 95 }, { source: 'dial-status', callStatus: 'completed', duration: 80 },
  ]), { status: 'COMPLETED', emitted: ['call.answered', 'call.ended'] }, 'caller hangs up a bridged call: the Dial action bills the bridge')

  t.same(run([
    { source: 'status', callStatus: 'in-progress' }, { source: 'dial-status', callStatus: 'completed', duration: 80 },
    { source: 'parent-status', callStatus: 'completed', duration: 95 },
  ]), { status: 'COMPLETED', emitted: ['call.answered', 'call.ended'] }, 'the parent completing after the Dial changes nothing')

  t.same(run([
    { source: 'dial-status', callStatus: 'no-answer' }, { source: 'parent-status', callStatus: 'completed', duration: 30 },
  ]), { status: 'MISSED', emitted: ['call.ended'] }, 'a Dial nobody answered, then the parent ends: one call.ended')
})

t.test('billableMinutes = ceil(seconds / 60), 0 → 0', async t => {
  for (const [s, m] of [[0, 0], [1, 1], [59, 1], [60, 1], [61, 2], [3600, 60], [-5, 0], [Number.NaN, 0]] as const) {
    t.equal(billableMinutes(s), m, `${s}s`)
  }
})

t.test('parseDurationSeconds', async t => {
  t.equal(parseDurationSeconds('42'), 42)
  t.equal(parseDurationSeconds('0'), 0)
  for (const bad of [undefined, '', '-1', '1.5', 'abc', '1e3', '9999999999']) t.equal(parseDurationSeconds(bad), undefined, String(bad))
})
