// The native maskline session behind a façade session: once its second participant exists, one
// native session pinned on both participants' proxy numbers carries the calls and SMS (the agent
// is the first participant, on its number; the customer the second, on its own). Closing,
// deleting or expiring the façade session ends it.
import type { E164 } from '../../engine/types.js'

export interface PinnedParty { phone: E164; proxy: E164 }

export interface PinnedSessionRequest {
  agent: PinnedParty
  customer: PinnedParty
  channels: ('voice' | 'sms')[]
  /** Ttl rounded up to whole minutes (the native timeout's unit); absent: none. */
  inactivityTimeoutMinutes?: number
  maxDurationMinutes: number
}

export interface PinnedSessions {
  /** Opens the native session; its id, or null when native sessions are not wired (see below). */
  open(tenantId: string, req: PinnedSessionRequest): Promise<string | null>
  close(tenantId: string, nativeId: string): Promise<void>
}

/**
 * Until the engine takes a session pinned on two proxy numbers, the façade keeps its own records
 * only: Sessions, Participants and MessageInteractions work, calls and SMS between the
 * participants are not routed (docs/twilio-proxy.md says so).
 */
export const unpinnedSessions: PinnedSessions = {
  open: async () => null,
  close: async () => {},
}
