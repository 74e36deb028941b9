// Serves the operator console (README.md, Operator console) at /console: the prebuilt files of console/dist (built by
// `npm run build:console`, committed, so `npm start` needs no build step of its own), read once at
// boot and answered from memory.
//
// Headers: the page's CSP allows scripts, styles and connections (the API and the /v1/stream
// WebSocket: CSP3 'self' covers ws:/wss: of the same host) from this origin only, and nothing
// inline. Assets carry a content hash in their names and are cached for a year; index.html is
// revalidated on every load (ETag), so a new build is picked up at once.
import { createHash } from 'node:crypto'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, extname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { HttpResponse, HttpRequest, TemplatedApp } from 'uWebSockets.js'
import type { Logger } from 'pino'
import { renderProblem } from '../api/problems.js'

export const CONSOLE_PATH = '/console'

export const CONSOLE_CSP = [
  "default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:", "font-src 'self'",
  "connect-src 'self'", "base-uri 'none'", "form-action 'self'", "frame-ancestors 'none'",
].join('; ')

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.txt': 'text/plain; charset=utf-8',
  '.map': 'application/json',
}

interface Asset { body: Buffer; type: string; etag: string; cache: string }

/**
 * console/dist, found from this module's own place: gateway/console.ts under tsx (tests) and
 * dist/gateway/console.js after tsc (`npm start`) sit one and two levels below the package root.
 */
export function consoleDistDir(): string | null {
  let dir = dirname(fileURLToPath(import.meta.url))
  for (let i = 0; i < 4; i++) {
    dir = dirname(dir)
    const candidate = join(dir, 'console', 'dist')
    if (existsSync(join(candidate, 'index.html'))) return candidate
  }
  return null
}

function loadAssets(dir: string): Map<string, Asset> {
  const assets = new Map<string, Asset>()
  for (const name of readdirSync(dir)) {
    const type = TYPES[extname(name)]
    if (!type) continue
    const body = readFileSync(join(dir, name))
    const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`
    // Only index.html keeps its name from build to build; every other file is content-hashed.
    const cache = name === 'index.html' ? 'no-cache' : 'public, max-age=31536000, immutable'
    assets.set(name, { body, type, etag, cache })
  }
  return assets
}

function sendAsset(res: HttpResponse, a: Asset, ifNoneMatch: string): void {
  res.cork(() => {
    const fresh = ifNoneMatch !== '' && ifNoneMatch.split(',').some(t => t.trim() === a.etag)
    res.writeStatus(fresh ? '304 Not Modified' : '200 OK')
    res.writeHeader('content-type', a.type)
    res.writeHeader('cache-control', a.cache)
    res.writeHeader('etag', a.etag)
    res.writeHeader('x-content-type-options', 'nosniff')
    res.writeHeader('referrer-policy', 'no-referrer')
    if (a.type.startsWith('text/html')) {
      res.writeHeader('content-security-policy', CONSOLE_CSP)
      res.writeHeader('x-frame-options', 'DENY')
    }
    if (fresh) res.endWithoutBody()
    else res.end(a.body)
  })
}

function problem(res: HttpResponse, baseUrl: string, slug: 'not-found' | 'unavailable', detail: string): void {
  const doc = renderProblem(baseUrl, slug, detail)
  res.cork(() => {
    res.writeStatus(slug === 'not-found' ? '404 Not Found' : '503 Service Unavailable')
    res.writeHeader('content-type', 'application/problem+json')
    res.writeHeader('x-content-type-options', 'nosniff')
    res.end(JSON.stringify(doc))
  })
}

/**
 * GET /console (the page; its views are #fragments, so there is one HTML document) and
 * GET /console/<file>. Without a build the page answers 503 and the service runs on: the API
 * does not depend on it.
 */
export function registerConsole(app: TemplatedApp, opts: { log: Pick<Logger, 'warn'>; publicBaseUrl: () => string; dir?: string | null }): void {
  const dir = opts.dir === undefined ? consoleDistDir() : opts.dir
  const assets = dir ? loadAssets(dir) : new Map<string, Asset>()
  const index = assets.get('index.html')
  if (!index) opts.log.warn({ code: 'console-missing' }, 'console/dist/index.html not found: /console is unavailable (npm run build:console)')

  const serve = (res: HttpResponse, req: HttpRequest) => {
    const name = req.getUrl().slice(CONSOLE_PATH.length + 1) || 'index.html' // '/console' and '/console/'
    if (name === 'index.html' && !index) return problem(res, opts.publicBaseUrl(), 'unavailable', 'The console is not built (npm run build:console)')
    const a = name.includes('/') ? undefined : assets.get(name)
    if (!a) return problem(res, opts.publicBaseUrl(), 'not-found', 'No such console file')
    sendAsset(res, a, req.getHeader('if-none-match'))
  }
  app.get(CONSOLE_PATH, serve)
  app.get(`${CONSOLE_PATH}/*`, serve)
}
