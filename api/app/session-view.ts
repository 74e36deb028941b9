// A session's API view (contract 2.2): as an object (viewOf) or written straight as JSON text
// (viewJson, the live read's fast path), and the metadata size check of creates and patches.
import type { SessionRecord } from '../../engine/types.js'
import { ApiProblem, JsonText } from '../route.js'
import type { SessionView } from '../schemas/session.js'
import { METADATA_MAX_BYTES } from '../schemas/session.js'
import { channelNames } from '../../sql/sessions.js'
import { isoTime as iso } from '../../sql/vocabulary/iso-time.js'

export function checkMetadataSize(m: Record<string, unknown> | undefined) {
  if (m && Buffer.byteLength(JSON.stringify(m)) > METADATA_MAX_BYTES) {
    throw new ApiProblem('validation', `metadata must be at most ${METADATA_MAX_BYTES} bytes serialized`, {
      errors: [{ field: 'metadata', issue: 'too_large' }],
    })
  }
}

export function viewOf(rec: SessionRecord, metadata: Record<string, unknown>, callCount: number, lastCallAt: number | null): SessionView {
  return {
    id: rec.id,
    tenantId: rec.tenantId,
    proxyNumber: rec.proxyNumber,
    state: rec.state,
    directionMode: rec.directionMode,
    metadata,
    gracePeriodMinutes: rec.gracePeriodMinutes,
    maxDurationMinutes: rec.maxDurationMinutes,
    recordingEnabled: rec.recordingEnabled,
    consentPrompt: rec.consentPrompt,
    expiresAt: iso(rec.expiresAt),
    createdAt: iso(rec.createdAt),
    activatedAt: iso(rec.activatedAt),
    endedAt: rec.endedAt === null ? null : iso(rec.endedAt),
    expiredAt: rec.expiredAt === null ? null : iso(rec.expiredAt),
    callCount,
    lastCallAt: lastCallAt === null ? null : iso(lastCallAt),
    channels: channelNames(rec.channels),
    inactivityTimeoutMinutes: rec.inactivityTimeoutMinutes ?? null,
  }
}

const CHANNELS_JSON = { 1: JSON.stringify(channelNames(1)), 2: JSON.stringify(channelNames(2)), both: JSON.stringify(channelNames(3)) }

/**
 * viewOf's answer as JSON text, written directly: a live session's GET skips parsing
 * its metadata, the view object, the allow-list copy and JSON.stringify (~2.5 µs of a ~18 µs read,
 * bench/RESULTS.md, "What moved the figures", 4e6f263). The fields in the schema's order; the metadata as stored
 * (JSON text in jsonb's key order); ids, enums, numbers and timestamps need no escaping.
 * test/api/sessions-memory-read.test.ts compares it with Postgres's answer in every state, and
 * with checkResponses every answer is checked against the schema (gateway/http/app.ts).
 */
export function viewJson(rec: SessionRecord, metadataJson: string, callCount: number, lastCallAt: number | null): JsonText {
  const channels = rec.channels === 1 ? CHANNELS_JSON[1] : rec.channels === 2 ? CHANNELS_JSON[2] : CHANNELS_JSON.both
  return new JsonText(`{"id":"${rec.id}","tenantId":"${rec.tenantId}","proxyNumber":${JSON.stringify(rec.proxyNumber)},"state":"${rec.state}",` +
    `"directionMode":"${rec.directionMode}","metadata":${metadataJson},"gracePeriodMinutes":${rec.gracePeriodMinutes},` +
    `"maxDurationMinutes":${rec.maxDurationMinutes},"recordingEnabled":${rec.recordingEnabled},"consentPrompt":"${rec.consentPrompt}",` +
    `"expiresAt":"${iso(rec.expiresAt)}","createdAt":"${iso(rec.createdAt)}","activatedAt":"${iso(rec.activatedAt)}",` +
    `"endedAt":${jsonIso(rec.endedAt)},"expiredAt":${jsonIso(rec.expiredAt)},"callCount":${callCount},"lastCallAt":${jsonIso(lastCallAt)},` +
    `"channels":${channels},"inactivityTimeoutMinutes":${rec.inactivityTimeoutMinutes ?? null}}`)
}

/** A timestamp as a JSON value: a quoted ISO string, or null (sql/transaction.ts isoOrNull gives the bare string). */
const jsonIso = (ms: number | null): string => ms === null ? 'null' : `"${iso(ms)}"`
