// contract D5 "Escape XML": every interpolated value, in attributes and in text, is escaped so a
// hostile value can neither break the document nor inject a verb.
import t from 'tap'
import fc from 'fast-check'
import { connectTexml, escapeXml, expiredTexml } from '../../api/cpaas/telnyx/texml.js'

const HOSTILE = `"><Hangup/>&'`

/** Minimal well-formedness check for the TeXML we emit: balanced elements, quoted attributes
 * without raw `<`, `&` only as one of the five entities, no characters XML 1.0 forbids. Returns
 * the element names in document order and the decoded attribute values / text nodes. */
function parse(xml: string): { elements: string[]; values: string[] } {
  const head = '<?xml version="1.0" encoding="UTF-8"?>'
  if (!xml.startsWith(head)) throw new Error('no XML declaration')
  let rest = xml.slice(head.length)
  // eslint-disable-next-line no-control-regex -- XML 1.0 forbids these
  if (/[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]/.test(rest)) throw new Error('forbidden character')
  if (/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(rest)) throw new Error('lone surrogate')
  const decode = (s: string) => {
    if (/&(?!(amp|lt|gt|quot|apos);)/.test(s)) throw new Error('bare &')
    return s.replace(/&(amp|lt|gt|quot|apos);/g, (_, e: string) => ({ amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" })[e]!)
  }
  const stack: string[] = []
  const elements: string[] = []
  const values: string[] = []
  while (rest.length) {
    if (rest.startsWith('</')) {
      const m = /^<\/([A-Za-z]+)>/.exec(rest)
      if (!m || stack.pop() !== m[1]) throw new Error('unbalanced close')
      rest = rest.slice(m[0].length)
    } else if (rest.startsWith('<')) {
      const m = /^<([A-Za-z]+)((?:\s+[A-Za-z]+="[^"<]*")*)\s*(\/?)>/.exec(rest)
      if (!m) throw new Error('bad tag at ' + JSON.stringify(rest.slice(0, 40)))
      elements.push(m[1]!)
      for (const a of m[2]!.matchAll(/([A-Za-z]+)="([^"<]*)"/g)) values.push(decode(a[2]!))
      if (!m[3]) stack.push(m[1]!)
      rest = rest.slice(m[0].length)
    } else {
      const end = rest.indexOf('<')
      const text = end === -1 ? rest : rest.slice(0, end)
      if (text.includes('>')) throw new Error('raw > in text')
      values.push(decode(text))
      rest = end === -1 ? '' : rest.slice(end)
    }
  }
  if (stack.length) throw new Error('unclosed ' + stack.join(','))
  return { elements, values }
}

t.test('escapeXml: the five characters, nothing else for plain and unicode text', async t => {
  t.equal(escapeXml(HOSTILE), '&quot;&gt;&lt;Hangup/&gt;&amp;&apos;')
  const plain = '+12025550100'
  t.equal(escapeXml(plain), plain)
  t.equal(escapeXml('Zoë 📞 東京'), 'Zoë 📞 東京', 'unicode kept as is (the document is UTF-8)')
  t.equal(escapeXml('a\u0000b\u001Fc\tn\nr\r'), 'abc\tn\nr\r', 'controls XML cannot carry are dropped')
  t.equal(escapeXml('x\uD800y\uDC00z'), 'x\uFFFDy\uFFFDz', 'lone surrogates become U+FFFD')
  t.equal(escapeXml('\uD83D\uDCDE'), '\uD83D\uDCDE', 'a surrogate pair is kept')
})

t.test('hostile values in every slot of connect: one Dial, no injected verb', async t => {
  const xml = connectTexml({
    baseUrl: `https://evil.example/${HOSTILE}`,
    callId: HOSTILE,
    to: HOSTILE + 'Zoë',
    callerId: HOSTILE,
    recording: true,
    consent: 'CUSTOM',
    consentAudioUrl: `https://a.example/${HOSTILE}.mp3`,
  })
  const { elements, values } = parse(xml)
  t.same(elements, ['Response', 'Play', 'Dial', 'Number'])
  t.notOk(xml.includes('<Hangup'), 'no Hangup element injected')
  t.ok(values.includes(HOSTILE), 'callerId round-trips')
  t.ok(values.includes(HOSTILE + 'Zoë'), 'the Number text round-trips')
  t.ok(values.includes(`https://a.example/${HOSTILE}.mp3`), 'the Play URL round-trips')
})

t.test('hostile values in the expired answers', async t => {
  const redirect = parse(expiredTexml({ expiredCallBehavior: 'REDIRECT_SUPPORT', supportPhone: HOSTILE }, HOSTILE))
  t.same(redirect.elements, ['Response', 'Dial', 'Number'])
  t.same(redirect.values, [HOSTILE, HOSTILE])
})

t.test('property: any string in any slot yields a well-formed document that round-trips', async t => {
  // What survives escaping: the value minus characters XML 1.0 cannot carry.
  const expected = (s: string) => s
    // eslint-disable-next-line no-control-regex -- XML 1.0 forbids these
    .replace(/[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]/g, '')
    .replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD')
  fc.assert(
    fc.property(fc.string({ unit: 'binary' }), fc.string({ unit: 'grapheme' }), (a, b) => {
      const to = '[' + a + ']'
      const xml = connectTexml({ baseUrl: 'https://x.example', callId: 'id', to, callerId: b, recording: false, consent: 'NONE', consentAudioUrl: null })
      const { elements, values } = parse(xml)
      return elements.join() === 'Response,Dial,Number' && values[0] === expected(b) && values.at(-1) === expected(to)
    }),
    { numRuns: 1000 },
  )
  t.pass('1000 runs')
})
