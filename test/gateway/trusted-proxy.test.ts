// contract D1 and 8.4: TRUSTED_PROXY names the terminators whose X-Forwarded-For is believed.
// Validated at boot; addresses compare whatever their spelling (uWS writes a dual-stack peer as
// eight zero-padded hex groups); the client is the rightmost hop that is not a trusted proxy.
import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ConfigError, loadConfig } from '../../gateway/config.js'
import { canonicalIp, clientIpResolver } from '../../gateway/http/client-ip.js'

function load(env: Record<string, string>) {
  const dir = mkdtempSync(join(tmpdir(), 'maskline-cfg-'))
  try {
    return loadConfig({ DATA_DIR: dir, ...env })
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

t.test('TRUSTED_PROXY at boot', async t => {
  t.same(load({}).trustedProxies, [], 'unset: nobody is trusted')
  t.same(load({ TRUSTED_PROXY: '127.0.0.1' }).trustedProxies, ['127.0.0.1'])
  t.same(load({ TRUSTED_PROXY: ' 10.0.0.5 , ::1,::ffff:192.0.2.1' }).trustedProxies, ['10.0.0.5', '0:0:0:0:0:0:0:1', '192.0.2.1'])
  for (const bad of ['nginx', '10.0.0.0/8', '127.0.0.1:8443', '999.1.1.1']) {
    try {
      load({ TRUSTED_PROXY: bad })
      t.fail(`${bad} accepted`)
    } catch (err) {
      t.type(err, ConfigError, bad)
      t.match((err as Error).message, /TRUSTED_PROXY/)
    }
  }
})

t.test('one spelling per address', async t => {
  t.equal(canonicalIp('127.0.0.1'), '127.0.0.1')
  t.equal(canonicalIp('0000:0000:0000:0000:0000:ffff:7f00:0001'), '127.0.0.1')
  t.equal(canonicalIp('::ffff:127.0.0.1'), '127.0.0.1')
  t.equal(canonicalIp('0000:0000:0000:0000:0000:0000:0000:0001'), canonicalIp('::1'))
  t.equal(canonicalIp('2001:DB8::1'), canonicalIp('2001:0db8:0000:0000:0000:0000:0000:0001'))
  t.equal(canonicalIp('unknown'), null)
})

t.test('the client behind a trusted proxy', async t => {
  const none = clientIpResolver([])
  t.equal(none('127.0.0.1', '198.51.100.1'), '127.0.0.1', 'no trusted proxy: the header is ignored')
  const r = clientIpResolver(['127.0.0.1', '10.0.0.5'])
  t.equal(r('0000:0000:0000:0000:0000:ffff:7f00:0001', '203.0.113.9, 198.51.100.7'), '198.51.100.7', 'dual-stack spelling of the proxy')
  t.equal(r('127.0.0.1', '198.51.100.7,10.0.0.5'), '198.51.100.7', 'trusted hops are skipped')
  t.equal(r('127.0.0.1', '198.51.100.7, 10.0.0.5, '), '198.51.100.7', 'empty entries are skipped')
  t.equal(r('127.0.0.1', '::ffff:198.51.100.7'), '198.51.100.7')
  t.equal(r('127.0.0.1', '10.0.0.5'), '127.0.0.1', 'only trusted hops: the peer')
  t.equal(r('127.0.0.1', undefined), '127.0.0.1')
  t.equal(r('198.51.100.50', '203.0.113.9'), '198.51.100.50', 'an untrusted peer is the client')
  t.equal(r('127.0.0.1', `${'x'.repeat(200)}`), 'x'.repeat(64), 'a hop that is no address is kept, bounded')
})
