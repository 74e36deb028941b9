// POST /v1/webhooks/cpaas/voice/recording: a call's recording is ready. Queued for the record
// writer, answered at once.
import { parseDurationSeconds } from '../../../engine/call-status.js'
import type { ApiReply, ApiRequest } from '../../route.js'
import { BAD_VOICE, UUID_RE, type CallbackContext } from './context.js'

export function recording({ d }: CallbackContext, req: ApiRequest): ApiReply {
  const f = req.form
  const callId = new URLSearchParams(req.rawQuery).get('callId')
  if (!f || !callId || !f['RecordingSid']) return BAD_VOICE
  if (!UUID_RE.test(callId)) return { status: 200 }
  const seconds = parseDurationSeconds(f['RecordingDuration'])
  void d.records.callEvent({
    key: { callId }, source: 'recording', value: f['RecordingStatus'] ?? 'completed', at: d.now(), recordingSid: f['RecordingSid'],
    ...(seconds !== undefined ? { duration: seconds } : {}), ...(f['RecordingUrl'] ? { recordingUrl: f['RecordingUrl'] } : {}),
  })
  return { status: 200 }
}
