// SIDs: two letters and 32 lowercase hex digits. The façade's resources have uuid keys, and a
// uuid is 32 hex digits: the SID is the prefix and the uuid without dashes, so it needs no
// mapping table. Accepted in either case.
import { createHash } from 'node:crypto'

export type SidPrefix = 'AC' | 'KS' | 'KC' | 'KP' | 'KI' | 'PN' | 'CA' | 'SM'

const SID_RE = /^([A-Za-z]{2})([0-9a-fA-F]{32})$/

export function sidOf(prefix: SidPrefix, uuid: string): string {
  return prefix + uuid.replaceAll('-', '').toLowerCase()
}

/** The uuid inside a SID of this prefix, or null. */
export function uuidOf(prefix: SidPrefix, sid: string): string | null {
  const m = SID_RE.exec(sid)
  if (!m || m[1]!.toUpperCase() !== prefix) return null
  const h = m[2]!.toLowerCase()
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`
}

/**
 * A stable SID for a value that is not a uuid (a pool number's PN SID, a provider id's CA/SM SID):
 * the first 32 hex digits of its SHA-256 under a label. Stable across nodes and restarts.
 */
export function derivedSid(prefix: SidPrefix, value: string): string {
  return prefix + createHash('sha256').update(`maskline twilio ${prefix}\0${value}`).digest('hex').slice(0, 32)
}

export function normalSid(sid: string): string {
  return SID_RE.test(sid) ? sid.slice(0, 2).toUpperCase() + sid.slice(2).toLowerCase() : sid
}
