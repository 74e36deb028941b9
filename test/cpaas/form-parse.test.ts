// contract D5: callbacks are form-encoded. The parser never throws: malformed input is null (400).
import t from 'tap'
import fc from 'fast-check'
import { canonicalFormString, encodeForm, formPairs, MAX_FORM_FIELDS, parseForm } from '../../api/cpaas/form.js'

t.test('a Telnyx voice fetch, from a Buffer', async t => {
  const body = Buffer.from('AccountSid=abc&CallSid=v3%3Axyz&From=%2B12025550142&To=%2B12025550100&CallStatus=ringing&Direction=inbound')
  t.same({ ...parseForm(body) }, {
    AccountSid: 'abc', CallSid: 'v3:xyz', From: '+12025550142', To: '+12025550100', CallStatus: 'ringing', Direction: 'inbound',
  })
})

t.test('+ is a space, %2B is a plus, UTF-8 escapes decode', async t => {
  t.same({ ...parseForm('Body=hello+world&From=%2B1202&Name=Zo%C3%AB+%F0%9F%93%9E') }, { Body: 'hello world', From: '+1202', Name: 'Zoë 📞' })
})

t.test('empty body, empty segments, missing = and empty names', async t => {
  t.same({ ...parseForm('') }, {})
  t.same({ ...parseForm('a=1&&b=2&') }, { a: '1', b: '2' })
  t.same({ ...parseForm('flag&x=') }, { flag: '', x: '' })
  t.same({ ...parseForm('=orphan&y=1') }, { y: '1' })
  t.same({ ...parseForm('k=a=b') }, { k: 'a=b' }, 'only the first = splits')
})

t.test('duplicate names: the first value wins in the object, every pair is kept in formPairs', async t => {
  t.same({ ...parseForm('To=%2B1&To=%2B2') }, { To: '+1' })
  t.same(formPairs('To=%2B1&To=%2B2'), [['To', '+1'], ['To', '+2']])
})

t.test('malformed percent-encoding gives null, never a throw', async t => {
  for (const bad of ['a=%', 'a=%2', 'a=%zz', 'a=%C3%28', '%E0%A4%A=1', 'a=%ED%A0%80']) {
    t.equal(parseForm(bad), null, bad)
  }
})

t.test('prototype keys are plain keys', async t => {
  const f = parseForm('__proto__=x&constructor=y&toString=z')!
  t.equal(Object.getPrototypeOf(f), null)
  t.equal(f['__proto__'], 'x')
  t.equal(f.constructor as unknown, 'y')
  t.equal(({} as Record<string, unknown>).x, undefined, 'Object.prototype untouched')
})

t.test('too many fields is malformed', async t => {
  const many = Array.from({ length: MAX_FORM_FIELDS + 1 }, (_, i) => `f${i}=1`).join('&')
  t.equal(parseForm(many), null)
  t.ok(parseForm(many, MAX_FORM_FIELDS + 1))
})

t.test('canonicalFormString: sorted by name (code-unit order), then value, name+value concatenated', async t => {
  t.equal(canonicalFormString({ To: '+18005551212', CallSid: 'CA1', Caller: '+1415', Digits: '1234' }), 'CallSidCA1Caller+1415Digits1234To+18005551212')
  t.equal(canonicalFormString([['b', '2'], ['a', 'z'], ['a', 'y'], ['B', '0']]), 'B0ayazb2')
  t.equal(canonicalFormString([]), '')
})

t.test('property: encodeForm → parseForm round-trips any well-formed fields', async t => {
  fc.assert(fc.property(
    fc.dictionary(fc.string({ minLength: 1 }), fc.string()),
    fields => {
      const cleanFields = Object.fromEntries(Object.entries(fields).filter(([k]) => !/[\uD800-\uDFFF]/.test(k)).map(([k, v]) => [k, v.replace(/[\uD800-\uDFFF]/g, '')]))
      const parsed = parseForm(encodeForm(cleanFields))
      return parsed !== null && JSON.stringify(Object.entries(parsed).sort()) === JSON.stringify(Object.entries(cleanFields).sort())
    },
  ), { numRuns: 500 })
  t.pass()
})

t.test('property: arbitrary input never throws', async t => {
  fc.assert(fc.property(fc.string({ unit: 'binary' }), s => { parseForm(s); parseForm(Buffer.from(s, 'latin1')); return true }), { numRuns: 2000 })
  t.pass()
})
