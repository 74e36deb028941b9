// contract D2/D4: the region of a number is its country by libphonenumber-js, with the calling
// code's main country for numbers the library cannot place (fictional ranges).
import t from 'tap'
import { regionOf } from '../../engine/index.js'

t.test('countries from the number', async t => {
  t.equal(regionOf('+12025550100'), 'US')
  t.equal(regionOf('+14165550123'), 'CA')
  t.equal(regionOf('+14165550199'), 'CA', 'the NANP area code answer is remembered')
  t.equal(regionOf('+4915112345678'), 'DE')
  t.equal(regionOf('+33612345678'), 'FR')
  t.equal(regionOf('+447700900123'), 'GB', 'drama range: main country of +44')
  t.equal(regionOf('+15555550100'), 'US', 'invalid NANP area code: main country of +1')
})

t.test('no calling code, no region', async t => {
  t.equal(regionOf('+999123456'), null)
  t.equal(regionOf('+'), null)
})
