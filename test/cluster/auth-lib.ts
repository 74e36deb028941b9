// Shared by the credential-throttle outage tests: two nodes on one Postgres and a private
// redis-server, each request from its own address (TRUSTED_PROXY is the test), so the per-address
// throttles never refuse the test's own traffic.
import { childData, request, type ChildService } from '../support/child-service.js'
import { privateRedis, startNode } from './lib.js'

export const embeddedSkip = (process.env.MASKLINE_TEST_BACKEND === 'embedded' || !process.env.TEST_DATABASE_URL) &&
  'embedded mode (PGlite, in-process bus) is single-node by design: no Redis to lose'

/** ACCOUNT_FAILURE_LIMIT of api/auth/account-throttle.ts. */
export const ACCOUNT_LIMIT = 10

export async function twoAuthNodes(t: Parameters<typeof privateRedis>[0] & Parameters<typeof startNode>[0]) {
  const redis = await privateRedis(t)
  const data = await childData(t)
  // Signups wait for a hashing slot as long as they need: these tests are about the throttles, and
  // on a loaded machine a hash takes seconds (the signup wait bound has its own test).
  const env = { TRUSTED_PROXY: '127.0.0.1', SIGNUP_MAX_WAIT_MS: '120000' }
  const nodes = await Promise.all([startNode(t, data, redis.url, env), startNode(t, data, redis.url, env)]) as [ChildService, ChildService]
  let ip = 0
  const address = () => `198.18.${(++ip >> 8) & 255}.${ip & 255}`
  const post = (node: number, path: string, body: unknown) => request(nodes[node]!.url, 'POST', path, { body, headers: { 'x-forwarded-for': address() } })
  return { redis, nodes, post }
}

/** Two token exchanges of a fresh API key, one per node: the remaining counts they report. */
export async function sharedCount(post: (node: number, path: string, body: unknown) => Promise<{ status: number; body: any }>, nodes: ChildService[]): Promise<unknown[]> {
  const fresh = await post(0, '/v1/auth/signup', { companyName: `Fresh ${process.pid} ${Date.now()}`, email: `fresh-${process.pid}-${Date.now()}@outage.example`, password: 'correct horse battery' })
  if (fresh.status !== 201) return [`signup ${fresh.status}`]
  const creds = JSON.stringify({ apiKey: fresh.body.apiKey, apiSecret: fresh.body.apiSecret })
  const out: unknown[] = []
  for (const n of nodes) {
    const r = await fetch(`${n.url}/v1/auth/token`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: creds })
    await r.arrayBuffer()
    out.push(r.status, r.headers.get('x-ratelimit-remaining'))
  }
  return out
}
