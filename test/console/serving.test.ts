// README.md, Operator console: GET /console and its assets from the service (gateway/console.ts): content types, cache
// headers (hashed assets for a year, the page revalidated with its ETag), a CSP of self only, no
// inline script in the page, and problem documents for what does not exist.
import t from 'tap'
import { readFileSync, readdirSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { startTestService } from '../support/service.js'
import { CONSOLE_CSP, consoleDistDir } from '../../gateway/console.js'

const dist = fileURLToPath(new URL('../../console/dist/', import.meta.url))

t.test('the console is found from the sources as from dist/ (npm start)', async t => {
  t.equal(consoleDistDir(), dist.replace(/\/$/, ''))
})

t.test('GET /console serves the page and its assets', async t => {
  const api = await startTestService(t)
  for (const path of ['/console', '/console/']) {
    const r = await fetch(api.url + path)
    t.equal(r.status, 200, path)
    t.equal(r.headers.get('content-type'), 'text/html; charset=utf-8')
    t.equal(r.headers.get('cache-control'), 'no-cache')
    t.equal(r.headers.get('content-security-policy'), CONSOLE_CSP)
    t.equal(r.headers.get('x-content-type-options'), 'nosniff')
    t.equal(r.headers.get('x-frame-options'), 'DENY')
    const html = await r.text()
    t.equal(html, readFileSync(dist + 'index.html', 'utf8'))
    t.notMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, 'no inline script')
    t.notMatch(html, /<style|style=/, 'no inline style')
    const etag = r.headers.get('etag')!
    const again = await fetch(api.url + path, { headers: { 'if-none-match': etag } })
    t.equal(again.status, 304, 'revalidated with the ETag')
    t.equal(await again.text(), '')
  }
  t.match(CONSOLE_CSP, /default-src 'none'/)
  t.match(CONSOLE_CSP, /script-src 'self';/)
  t.match(CONSOLE_CSP, /connect-src 'self';/)
  t.notMatch(CONSOLE_CSP, /unsafe-inline|unsafe-eval|\*/)

  const types: Record<string, RegExp> = { js: /^text\/javascript; charset=utf-8$/, css: /^text\/css; charset=utf-8$/ }
  const assets = readdirSync(dist).filter(n => n !== 'index.html')
  t.equal(assets.length, 2, 'one script, one stylesheet')
  for (const name of assets) {
    t.match(name, /^app-[0-9a-f]{12}\.(js|css)$/, 'content-hashed name')
    const r = await fetch(`${api.url}/console/${name}`)
    t.equal(r.status, 200)
    t.match(r.headers.get('content-type'), types[name.split('.').pop()!]!)
    t.equal(r.headers.get('cache-control'), 'public, max-age=31536000, immutable')
    t.ok(Buffer.from(await r.arrayBuffer()).equals(readFileSync(dist + name)), `${name} byte for byte`)
  }

  for (const path of ['/console/nope.js', '/console/../package.json', '/console/a/b.js']) {
    const r = await fetch(api.url + path)
    t.equal(r.status, 404, path)
    t.match(r.headers.get('content-type'), /^application\/problem\+json/)
    t.match(await r.json(), { type: /\/errors\/not-found$/, status: 404 })
  }
})
