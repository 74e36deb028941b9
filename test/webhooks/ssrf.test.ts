// SSRF guard (contract D6): address classification, URL checks, and the pinned lookup.
import t from 'tap'
import { checkWebhookUrl, classifyAddress, isPublicAddress, parseIPv4, parseIPv6, pinnedLookup } from '../../api/webhooks/ssrf.js'

t.test('IPv4 classification', async t => {
  const cases: Array<[string, string]> = [
    ['8.8.8.8', 'public'], ['1.1.1.1', 'public'], ['93.184.216.34', 'public'],
    ['0.0.0.0', 'unspecified'], ['0.1.2.3', 'unspecified'],
    ['127.0.0.1', 'loopback'], ['127.255.255.254', 'loopback'],
    ['10.0.0.1', 'private'], ['172.16.0.1', 'private'], ['172.31.255.255', 'private'], ['192.168.1.1', 'private'],
    ['172.15.255.255', 'public'], ['172.32.0.0', 'public'],
    ['100.64.0.1', 'cgnat'], ['100.127.255.255', 'cgnat'], ['100.128.0.0', 'public'],
    ['169.254.1.1', 'link-local'], ['169.254.169.254', 'metadata'], ['169.254.170.2', 'metadata'], ['100.100.100.200', 'metadata'],
    ['192.0.0.8', 'reserved'], ['192.0.2.1', 'documentation'], ['198.51.100.1', 'documentation'], ['203.0.113.9', 'documentation'],
    ['198.18.0.1', 'reserved'], ['198.19.255.255', 'reserved'], ['192.88.99.1', 'reserved'],
    ['224.0.0.1', 'multicast'], ['239.255.255.250', 'multicast'], ['240.0.0.1', 'reserved'], ['255.255.255.255', 'broadcast'],
  ]
  for (const [ip, cls] of cases) t.equal(classifyAddress(ip), cls, ip)
})

t.test('IPv4 spellings that inet_aton accepts: decimal, hex, octal, short forms', async t => {
  t.same(parseIPv4('2130706433'), [127, 0, 0, 1])
  t.same(parseIPv4('0x7f000001'), [127, 0, 0, 1])
  t.same(parseIPv4('0x7f.1'), [127, 0, 0, 1])
  t.same(parseIPv4('0177.0.0.1'), [127, 0, 0, 1])
  t.same(parseIPv4('127.1'), [127, 0, 0, 1])
  t.same(parseIPv4('10.1.1'), [10, 1, 0, 1])
  t.same(parseIPv4('0xA9.0xFE.0xA9.0xFE'), [169, 254, 169, 254])
  t.equal(parseIPv4('256.0.0.1'), null)
  t.equal(parseIPv4('4294967296'), null)
  t.equal(parseIPv4('1.2.3.4.5'), null)
  t.equal(parseIPv4('08.0.0.1'), null)
  t.equal(parseIPv4('example.com'), null)
  for (const ip of ['2130706433', '0x7f.1', '0177.0.0.1', '127.1', '0xa9fea9fe', '3232235777']) t.not(classifyAddress(ip), 'public', ip)
})

t.test('IPv6 classification, mapped and embedded IPv4', async t => {
  const cases: Array<[string, string]> = [
    ['2606:4700:4700::1111', 'public'], ['2001:4860:4860::8888', 'public'], ['[2a00:1450:4001:82a::200e]', 'public'],
    ['::', 'unspecified'], ['::1', 'loopback'], ['[::1]', 'loopback'], ['0:0:0:0:0:0:0:1', 'loopback'],
    ['::ffff:127.0.0.1', 'loopback'], ['::ffff:7f00:1', 'loopback'], ['::ffff:10.0.0.1', 'private'],
    ['::ffff:169.254.169.254', 'metadata'], ['::ffff:8.8.8.8', 'public'], ['::127.0.0.1', 'loopback'], ['::8.8.8.8', 'reserved'],
    ['64:ff9b::a9fe:a9fe', 'metadata'], ['64:ff9b::8.8.8.8', 'public'], ['64:ff9b:1::1', 'reserved'],
    ['2002:7f00:1::', 'loopback'], ['2002:0808:0808::1', 'public'],
    ['fc00::1', 'unique-local'], ['fd12:3456::1', 'unique-local'], ['fd00:ec2::254', 'metadata'],
    ['fe80::1', 'link-local'], ['fe80::1%eth0', 'link-local'], ['febf::1', 'link-local'], ['fec0::1', 'private'],
    ['ff02::1', 'multicast'], ['2001:db8::1', 'documentation'], ['3fff::1', 'documentation'],
    ['2001::1', 'reserved'], ['100::1', 'reserved'], ['4000::1', 'reserved'],
  ]
  for (const [ip, cls] of cases) t.equal(classifyAddress(ip), cls, ip)
  t.equal(parseIPv6('1::2::3'), null)
  t.equal(parseIPv6('1:2:3:4:5:6:7:8:9'), null)
  t.equal(parseIPv6('12345::'), null)
  t.equal(parseIPv6('::ffff:1.2.3'), null)
  t.equal(classifyAddress('not-an-ip'), 'invalid')
  t.equal(isPublicAddress('not-an-ip'), false)
})

t.test('URL check: https only, no credentials, no literal non-public hosts', async t => {
  const secure = { allowInsecure: false }
  t.match(checkWebhookUrl('https://hooks.example.com/in?x=1', secure), { ok: true })
  t.match(checkWebhookUrl('https://93.184.216.34/in', secure), { ok: true })
  t.same(checkWebhookUrl('http://hooks.example.com/in', secure), { ok: false, reason: 'insecure-scheme' })
  t.same(checkWebhookUrl('ftp://hooks.example.com/in', secure), { ok: false, reason: 'invalid-url' })
  t.same(checkWebhookUrl('not a url', secure), { ok: false, reason: 'invalid-url' })
  t.same(checkWebhookUrl('https://user:pw@hooks.example.com/', secure), { ok: false, reason: 'credentials-in-url' })
  for (const u of [
    'https://127.0.0.1/', 'https://2130706433/', 'https://0x7f.1/', 'https://0177.0.0.1/', 'https://[::1]/',
    'https://[::ffff:127.0.0.1]/', 'https://169.254.169.254/latest/meta-data/', 'https://[fd00:ec2::254]/',
    'https://10.0.0.1/', 'https://100.64.0.1/', 'https://localhost/', 'https://api.localhost/', 'https://metadata.google.internal/',
    'https://localhost./',
  ]) t.same(checkWebhookUrl(u, secure), { ok: false, reason: 'blocked-address' }, u)
})

t.test('allowInsecure lifts scheme and address rules, not the rest', async t => {
  const dev = { allowInsecure: true }
  t.match(checkWebhookUrl('http://127.0.0.1:8080/hook', dev), { ok: true })
  t.match(checkWebhookUrl('http://localhost/hook', dev), { ok: true })
  t.same(checkWebhookUrl('https://u:p@127.0.0.1/', dev), { ok: false, reason: 'credentials-in-url' })
  t.same(checkWebhookUrl('file:///etc/passwd', dev), { ok: false, reason: 'invalid-url' })
})

t.test('pinned lookup refuses names that resolve to non-public addresses', async t => {
  const lookup = pinnedLookup(false)
  const ask = (all: boolean) => new Promise<{ err: NodeJS.ErrnoException | null; addr: unknown }>(resolve =>
    lookup('localhost', { all }, (err, addr) => resolve({ err, addr })))
  for (const all of [false, true]) {
    const { err } = await ask(all)
    t.equal(err?.code, 'EBLOCKEDADDRESS', `all=${all}`)
  }
  const open = pinnedLookup(true)
  const res = await new Promise<{ err: unknown; addr: unknown; family: unknown }>(resolve =>
    open('localhost', {}, (err, addr, family) => resolve({ err, addr, family })))
  t.equal(res.err, null)
  t.ok(res.addr === '127.0.0.1' || res.addr === '::1')
})
