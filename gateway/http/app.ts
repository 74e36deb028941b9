// The HTTP gateway: the REST API and the provider callbacks on one uWS app (the WebSocket stream
// shares it: gateway/compose.ts registers it first, contract D1). Every request runs the same short pipeline:
//   capture (sync) → body (onData, capped) → auth → tenant rate limit → parse + validate →
//   handler → allow-list serialization → corked write → one log line.
import uWS, { type HttpRequest, type HttpResponse, type TemplatedApp, type us_listen_socket } from 'uWebSockets.js'
import type { Logger } from 'pino'
import { accessLineWriter, type AccessLine } from '../../api/log.js'
import { TIER_LIMITS } from '../../engine/types.js'
import type { Authenticator } from '../../api/auth/authenticate.js'
import { rateLimitHeaders, WINDOW_MS, type RateDecision, type RateLimiter } from '../../api/rate-limit/limiter.js'
import { ApiProblem, type ApiReply, type AuthContext, type RouteDef } from '../../api/route.js'
import type { Services } from '../../api/services.js'
import { formPairs, type FormPair } from '../../api/cpaas/form.js'
import type { SignedRequest, VerifyResult } from '../../api/cpaas/signature.js'
import { BodyAborted, DRAIN_LIMIT, readBody } from './body.js'
import { capture, type Captured } from './capture.js'
import { clientIpResolver, type ClientIpResolver } from './client-ip.js'
import { compileRoute, type CompiledRoute } from './compile.js'
import { send, type Outgoing } from './respond.js'
import { buildRequest } from './request.js'
import { errorOut, problemOut, replyOut, tooLarge } from './reply.js'

export interface HttpAppOptions {
  services: Services
  routes: readonly RouteDef[]
  /** Check every reply body against its response schema; a mismatch answers 500 (tests). */
  checkResponses?: boolean
  /**
   * Register on this app instead of a new uWS.App(): the service's, with the WebSocket stream on it
   * (gateway/compose.ts), or a benchmark's that drives the handlers in process. The 404/405
   * fallbacks are registered here, after the routes.
   */
  app?: TemplatedApp
  /** Checks the provider's signature of a `signed` route (contract D5); required when one is routed. */
  verifyCallback?: (req: SignedRequest) => VerifyResult
  /** Counts every answer by route pattern and status class (gateway/metrics.ts). */
  metrics?: { observe(route: string | null, status: number, us: number): void }
  /** 'failures': access lines only for answers ≥ 400, aborted and slow ones (docs/operations.md, "Access log"). */
  accessLog?: 'all' | 'failures'
}

export interface HttpApp {
  app: TemplatedApp
  listen(host: string, port: number): Promise<number>
  /** Stops accepting, lets in-flight requests finish (up to `graceMs`), then closes every socket. */
  close(graceMs?: number): Promise<void>
  /** Requests being handled now. */
  inFlight(): number
}

interface Env {
  services: Services
  log: Logger
  auth: Authenticator
  limiter: RateLimiter
  checkResponses: boolean
  clientIp: ClientIpResolver
  verifyCallback: ((req: SignedRequest) => VerifyResult) | null
  inFlight: number
  drained: (() => void) | null
  metrics: { observe(route: string | null, status: number, us: number): void } | null
  logAll: boolean
  /** The info-level access line, composed without pino's per-line work (api/log.ts). */
  accessLine: AccessLine
  /** Draining (close()): every answer closes its connection, so keep-alive clients reconnect elsewhere. */
  draining: boolean
}

/** With ACCESS_LOG=failures, a success slower than this is logged all the same. */
const SLOW_US = 250_000


const UWS_METHOD = { GET: 'get', POST: 'post', PATCH: 'patch', PUT: 'put', DELETE: 'del' } as const
const EMPTY = Buffer.alloc(0)

export function createHttpApp(opts: HttpAppOptions): HttpApp {
  const { services } = opts
  const env: Env = {
    services,
    log: services.log,
    auth: services.authenticator,
    limiter: services.rateLimiter,
    checkResponses: opts.checkResponses ?? false,
    clientIp: clientIpResolver(services.config.trustedProxies),
    verifyCallback: opts.verifyCallback ?? null,
    inFlight: 0,
    drained: null,
    metrics: opts.metrics ?? null,
    logAll: (opts.accessLog ?? 'all') === 'all',
    accessLine: accessLineWriter(services.log),
    draining: false,
  }
  const app = opts.app ?? uWS.App()
  const methodsByPath = new Map<string, string[]>()
  for (const def of opts.routes) {
    const key = `${def.method} ${def.path}`
    if (def.signed && !env.verifyCallback) throw new Error(`${key} is signed, but no callback verifier was given`)
    const known = methodsByPath.get(def.path) ?? []
    if (known.includes(def.method)) throw new Error(`route registered twice: ${key}`)
    methodsByPath.set(def.path, [...known, def.method])
    const compiled = compileRoute(def, env.checkResponses)
    app[UWS_METHOD[def.method]](def.path, (res, req) => onRequest(env, compiled, res, req))
  }
  for (const [path, methods] of methodsByPath) {
    const allow = methods.join(', ')
    const own = opts.routes.find(d => d.path === path && d.refusal)?.refusal
    app.any(path, (res, req) => fallback(env, res, req, path, 'method-not-allowed', { allow }, own))
  }
  app.any('/*', (res, req) => fallback(env, res, req, null, 'not-found'))

  let listenSocket: us_listen_socket | null = null
  return {
    app,
    listen(host, port) {
      return new Promise((resolve, reject) => {
        app.listen(host, port, sock => {
          if (!sock) return reject(new Error(`cannot listen on ${host}:${port}`))
          listenSocket = sock
          resolve(uWS.us_socket_local_port(sock))
        })
      })
    },
    inFlight: () => env.inFlight,
    async close(graceMs = 5_000) {
      env.draining = true
      if (listenSocket) uWS.us_listen_socket_close(listenSocket)
      listenSocket = null
      if (env.inFlight > 0) {
        await new Promise<void>(resolve => {
          const timer = setTimeout(resolve, graceMs)
          env.drained = () => { clearTimeout(timer); resolve() }
        })
        // The last answers were written with `Connection: close`: a moment for them to leave
        // before every socket is closed.
        await new Promise(resolve => setTimeout(resolve, 50))
      }
      // Keep-alive and WebSocket connections: uWS 20.30 has app.close(), its typings do not.
      ;(app as TemplatedApp & { close?: () => void }).close?.()
    },
  }
}

function onRequest(env: Env, r: CompiledRoute, res: HttpResponse, req: HttpRequest): void {
  const c = capture(res, req, r.paramNames, r.def.clientIp ? env.clientIp : null)
  res.onAborted(() => {
    c.aborted = true
    c.abortBody?.()
  })
  env.inFlight++
  if (!r.readsBody) {
    run(env, r, res, c, null)
    return
  }
  const declared = c.headers['content-length']
  if (declared !== undefined && Number(declared) > r.bodyLimit) {
    // Answered before reading. uWS then reads and drops the declared body and the
    // connection stays usable; past DRAIN_LIMIT it is closed instead (bounded work).
    finish(env, r.def.path, res, c, tooLarge(env, r), null, Number(declared) > DRAIN_LIMIT)
    return
  }
  readBody(res, r.bodyLimit, abort => { c.abortBody = abort }, (err, body) => {
    c.abortBody = undefined
    if (err === null) {
      run(env, r, res, c, body)
      return
    }
    // 499 (nginx's "client closed request"): logged, nothing is sent.
    if (err instanceof BodyAborted) return finish(env, r.def.path, res, c, { status: 499, contentType: null, body: null, headers: [] }, null)
    // Over the cap: 413 once the rest was read and dropped (readBody), or closing past DRAIN_LIMIT.
    finish(env, r.def.path, res, c, tooLarge(env, r), null, !err.drained)
  })
}

/** A request between the steps of its pipeline (run, advance). */
interface Job {
  env: Env
  r: CompiledRoute
  res: HttpResponse
  c: Captured
  raw: Buffer | null
  /** A form callback's body, parsed once for its signature and its handler. */
  pairs: readonly FormPair[] | null | undefined
  auth: AuthContext | null
  limitAt: number
  limitHeaders: Record<string, string> | undefined
}

// Where advance() resumes, named by the result it takes: none yet, the authentication, the
// tenant limit's decision; after LIMITED, the handler's reply.
const START = 0, AUTHENTICATED = 1, LIMITED = 2

function run(env: Env, r: CompiledRoute, res: HttpResponse, c: Captured, raw: Buffer | null): void {
  const pairs = r.def.form && raw ? formPairs(raw) : undefined
  advance({ env, r, res, c, raw, pairs, auth: null, limitAt: 0, limitHeaders: undefined }, START, undefined)
}

/**
 * Runs the pipeline from `step` on. A step whose result is at hand goes straight on: on the hot
 * path (a cached token, the in-memory limiter, a handler answering from memory) the request is
 * answered in uWS's own callback with no promise at all (as an async function this pipeline cost
 * every request a promise, and the async hooks slonik's AsyncLocalStorage turns on ran for it). A
 * step that returns a promise continues from the next step when it settles.
 */
function advance(job: Job, step: number, value: unknown): void {
  const { env, r, c } = job
  const def = r.def
  let out: Outgoing | undefined
  let failure: unknown = null
  try {
    while (out === undefined) {
      let next: unknown
      if (step === START) {
        if (def.signed) {
          const v = env.verifyCallback!({ headers: c.headers, rawBody: job.raw ?? EMPTY, path: c.path, query: c.rawQuery, ...(job.pairs !== undefined ? { pairs: job.pairs } : {}) })
          if (!v.ok) {
            env.log.warn({ reason: v.reason, callback: def.signed.name }, 'callback signature refused')
            out = replyOut(env, r, def.signed.refusal)
            break
          }
        }
        next = def.auth === 'none' ? null : env.auth.authenticate(c.headers.authorization, def.auth, def.roles)
      } else if (step === AUTHENTICATED) {
        const auth = job.auth = value as AuthContext | null
        if (auth && r.rateLimited) {
          job.limitAt = env.services.now()
          next = tenantLimit(env, auth)
        } else next = null
      } else if (step === LIMITED) {
        const d = value as RateDecision | null
        if (d) {
          job.limitHeaders = rateLimitHeaders(d, job.limitAt)
          if (!d.allowed) throw new ApiProblem('rate-limit', `At most ${d.limit} requests per minute on the ${job.auth!.tier} tier`)
        }
        next = def.handler(buildRequest(env, r, c, job.raw, job.auth, job.pairs))
      } else { // the handler's reply
        out = replyOut(env, r, value as ApiReply)
        break
      }
      step++
      if (next instanceof Promise) {
        const resume = step
        next.then(v => advance(job, resume, v), (err: unknown) => answer(job, errorOut(env, err), err))
        return
      }
      value = next
    }
  } catch (err) {
    failure = err
    out = errorOut(env, err)
  }
  answer(job, out!, failure)
}

function answer(job: Job, out: Outgoing, failure: unknown): void {
  if (job.limitHeaders) out.headers.unshift(job.limitHeaders)
  finish(job.env, job.r.def.path, job.res, job.c, out, job.auth, false, failure)
}

/**
 * Contract 8.1. The limiter failing (Redis unreachable) must not take the whole API down with it:
 * the request is admitted without rate-limit headers and the failure is logged. The token and
 * login throttles (api/routes/auth.ts) fail closed instead: they guard credentials.
 */
function tenantLimit(env: Env, auth: AuthContext): RateDecision | null | Promise<RateDecision | null> {
  try {
    const d = env.limiter.hit(limiterKey(auth.tenantId), TIER_LIMITS[auth.tier].requestsPerMinute, WINDOW_MS)
    return d instanceof Promise ? d.catch((err: unknown) => limiterDown(env, err)) : d
  } catch (err) {
    return limiterDown(env, err)
  }
}

// A tenant's limiter key, made once: a key built per request was a new string for the limiter's
// Map to flatten and hash every time (~0.3 µs of a session read). One entry per tenant that
// authenticated here: the ids come from verified tokens, so the map is bounded by the tenants.
const limiterKeys = new Map<string, string>()
function limiterKey(tenantId: string): string {
  let k = limiterKeys.get(tenantId)
  if (k === undefined) limiterKeys.set(tenantId, (k = `tenant:${tenantId}`))
  return k
}

function limiterDown(env: Env, err: unknown): null {
  env.log.warn({ code: 'rate-limiter', error: err }, 'rate limiter unavailable; request admitted')
  return null
}

function finish(env: Env, route: string | null, res: HttpResponse, c: Captured, out: Outgoing, auth: AuthContext | null, close = false, failure: unknown = null): void {
  if (close || env.draining) out.close = true
  if (!c.aborted) {
    try {
      send(res, out)
    } catch (err) {
      // The connection went away between the check and the write: nothing left to answer.
      env.log.warn({ code: 'write-failed', error: err }, 'response not written')
    }
  }
  const us = Math.round((performance.now() - c.start) * 1000)
  env.metrics?.observe(route, out.status, us)
  // ACCESS_LOG=failures: successes are counted (above), not written, unless slow.
  if (!env.logAll && out.status < 400 && !c.aborted && us < SLOW_US) {
    if (--env.inFlight === 0 && env.drained) env.drained()
    return
  }
  if (out.status < 500) {
    env.accessLine(c.method, route, out.status, us, auth?.tenantId, out.instance || undefined, c.aborted)
  } else {
    const line: Record<string, unknown> = { method: c.method, route, status: out.status, us }
    if (auth) line.tenantId = auth.tenantId
    if (out.instance) line.instance = out.instance
    if (c.aborted) line.aborted = true
    if (failure !== null || out.status !== 503) env.log.error({ ...line, error: failure }, 'request failed') // the serializer keeps name, code, frames
    else env.log.warn(line, 'request refused') // a 503 the route answers by design (readiness, SMS retry, store down)
  }
  if (--env.inFlight === 0 && env.drained) env.drained()
}

function fallback(env: Env, res: HttpResponse, req: HttpRequest, route: string | null, slug: 'not-found' | 'method-not-allowed', extra?: { allow: string }, own?: RouteDef['refusal']): void {
  const c = capture(res, req, [], null)
  env.inFlight++
  const detail = slug === 'not-found' ? 'No such endpoint' : `Allowed methods: ${extra!.allow}`
  const headers = extra ? { allow: extra.allow } : undefined
  const out: Outgoing = own
    ? (r => ({ status: r.status, contentType: r.contentType, body: r.body, headers: [headers] }))(own(405, detail))
    : problemOut(env, slug, detail, undefined, headers)
  finish(env, route, res, c, out, null)
}
