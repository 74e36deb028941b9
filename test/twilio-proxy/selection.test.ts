// The proxy number a participant gets (api/twilio-proxy/selection.ts, docs/twilio-proxy.md):
// requested numbers, the partner's number, GeoMatchLevel, stickiness, reserved numbers, and the
// Twilio code of each refusal.
import t from 'tap'
import { selectNumber, type SelectionInput } from '../../api/twilio-proxy/selection.js'
import { TwilioError } from '../../api/twilio-proxy/errors.js'

const US1 = '+12025550101', US2 = '+14155550102', US3 = '+14155550103', GB1 = '+442079460101'
const pool = (...n: string[]) => n.map(number => ({ number, is_reserved: false, in_use: 0 }))
const base = (o: Partial<SelectionInput>): SelectionInput => ({ pool: pool(US1, US2, US3, GB1), identifier: '+14155550199', busy: new Set(), behavior: 'prefer-sticky', geoMatchLevel: 'country', ...o })
const code = (r: string | TwilioError) => (r instanceof TwilioError ? r.twilioCode : r)

t.test('requested numbers', async t => {
  t.equal(selectNumber(base({ requested: US2 })), US2)
  t.equal(code(selectNumber(base({ requested: '+12025550999' }))), 80605, 'not in the pool')
  t.equal(code(selectNumber(base({ requested: US2, busy: new Set([US2]) }))), 80604, 'the identifier is active on it')
  t.equal(selectNumber(base({ pool: [{ number: US2, is_reserved: true, in_use: 0 }], requested: US2 })), US2, 'a reserved number when asked for')
})

t.test('country and area code', async t => {
  t.equal(selectNumber(base({ identifier: '+447700900123' })), GB1, 'a UK identifier gets the UK number')
  t.equal(code(selectNumber(base({ identifier: '+33612345678' }))), 80203, 'no French number')
  t.equal(selectNumber(base({ geoMatchLevel: 'area-code' })), US2, 'area code 415')
  t.equal(code(selectNumber(base({ geoMatchLevel: 'area-code', identifier: '+13125550100' }))), 80206)
})

t.test('the partner\'s number, stickiness, load, exhaustion', async t => {
  t.equal(selectNumber(base({ partner: US3 })), US3, 'one number serves both when it can')
  t.not(selectNumber(base({ partner: US3, busy: new Set([US3]) })), US3, 'else another')
  t.equal(selectNumber(base({ last: US3 })), US3, 'prefer-sticky takes the last number')
  t.not(selectNumber(base({ last: US1, behavior: 'avoid-sticky' })), US1, 'avoid-sticky avoids it')
  t.equal(selectNumber(base({ pool: [{ number: US1, is_reserved: false, in_use: 5 }, { number: US2, is_reserved: false, in_use: 1 }] })), US2, 'the least used')
  t.equal(code(selectNumber(base({ busy: new Set([US1, US2, US3]) }))), 80208)
  t.equal(code(selectNumber(base({ pool: [] }))), 80205)
  t.equal(code(selectNumber(base({ pool: [{ number: US1, is_reserved: true, in_use: 0 }] }))), 80207, 'reserved numbers only when asked for')
})
