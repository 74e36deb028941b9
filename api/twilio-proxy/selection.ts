// Which proxy number a participant gets (docs/twilio-proxy.md). Pure: the caller
// reads the Service's pool and the identifier's active numbers.
//  - ProxyIdentifier(Sid) given: that number, if it is in the pool (80605) and the identifier is
//    not already active on it (80604). Reserved numbers only this way.
//  - the second participant gets the first one's number when it is free for it (one number when one
//    serves both, maskline's own rule), else another;
//  - GeoMatchLevel: the number's country calling code is the identifier's (NANP is one country, as
//    Twilio maps it); `area-code` also wants the identifier's NANP area code;
//  - prefer-sticky takes the number the identifier had last in this Service when usable,
//    avoid-sticky avoids it when there is another; then the least used number.
import { parsePhoneNumberFromString } from 'libphonenumber-js'
import { rule, type TwilioError } from './errors.js'

export interface PoolEntry { number: string; is_reserved: boolean; in_use: number }

export interface SelectionInput {
  pool: PoolEntry[]
  identifier: string
  /** Numbers on which the identifier is active in an open session. */
  busy: ReadonlySet<string>
  requested?: string | undefined
  /** The first participant's number, when choosing for the second. */
  partner?: string | undefined
  last?: string | null | undefined
  behavior: string
  geoMatchLevel: string
}

export function callingCode(e164: string): string {
  return parsePhoneNumberFromString(e164)?.countryCallingCode ?? e164.slice(1, 2)
}

const areaCode = (e164: string) => (e164.startsWith('+1') ? e164.slice(2, 5) : null)

export function selectNumber(i: SelectionInput): string | TwilioError {
  if (i.requested !== undefined) {
    if (!i.pool.some(p => p.number === i.requested)) return rule(80605, 'Proxy Identifier is not in the Service')
    if (i.busy.has(i.requested)) return rule(80604, 'The participant is already active on this proxy identifier in another session')
    return i.requested
  }
  if (i.pool.length === 0) return rule(80205, 'The Service has no proxy numbers')
  const unreserved = i.pool.filter(p => !p.is_reserved)
  if (unreserved.length === 0) return rule(80207, 'No unreserved numbers in the proxy pool')
  const code = callingCode(i.identifier)
  let geo = unreserved.filter(p => callingCode(p.number) === code)
  if (geo.length === 0) return rule(80203, 'No available proxy number for the participant\'s country')
  if (i.geoMatchLevel === 'area-code' && code === '1') {
    const area = areaCode(i.identifier)
    geo = geo.filter(p => areaCode(p.number) === area)
    if (geo.length === 0) return rule(80206, 'No available proxy number in the participant\'s area code')
  }
  let free = geo.filter(p => !i.busy.has(p.number))
  if (free.length === 0) return rule(80208, 'Every matching proxy number is already used by this participant')
  if (i.partner !== undefined && free.some(p => p.number === i.partner)) return i.partner
  if (i.last) {
    if (i.behavior === 'prefer-sticky' && free.some(p => p.number === i.last)) return i.last
    if (i.behavior === 'avoid-sticky' && free.length > 1) free = free.filter(p => p.number !== i.last)
  }
  return free.reduce((best, p) => (p.in_use < best.in_use ? p : best)).number
}
