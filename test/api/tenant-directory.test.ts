// One tenant directory, in memory and kept current. Two whole services
// (gateway/service.ts, in this process) on one database: a key rotated or a tenant suspended
// through node A is refused on node A and on node B on the very next request, and lifting the
// suspension applies as fast. In services mode the nodes meet on the Redis bus (TEST_REDIS_URL);
// embedded mode is one node by design (the in-process bus delivers nothing to anyone), so the
// cross-node test is skipped there, as in test/stream/stream-service.test.ts.
import { mkdtempSync, rmSync } from 'node:fs'
import { randomBytes } from 'node:crypto'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import t, { type Test } from 'tap'
import { SignJWT } from 'jose'
import { sql } from 'slonik'
import { loadConfig } from '../../gateway/config.js'
import { startService, type RunningService } from '../../gateway/service.js'
import { tokenSigner, verifyToken, keyId } from '../../api/auth/tokens.js'
import { createAuthenticator } from '../../api/auth/authenticate.js'
import { newCredentials } from '../../api/auth/credentials.js'
import { uuidv7 } from '../../sql/vocabulary/ids.js'
import { TenantDirectory } from '../../api/app/tenant-directory.js'
import { createTenantWithOwner } from '../../sql/tenants.js'
import { testDatabase } from '../support/db.js'
import type { Database } from '../../sql/db.js'

const embedded = process.env.MASKLINE_TEST_BACKEND === 'embedded' || !process.env.TEST_DATABASE_URL
const singleNode = embedded && 'embedded mode (PGlite, in-process bus) is single-node by design: no second node to reach'

interface Node {
  svc: RunningService
  lines: string[]
  req(method: string, path: string, o?: { body?: unknown; token?: string }): Promise<{ status: number; body: any }>
}

/** Nodes sharing one database, JWT key and phone key (and Redis, when TEST_REDIS_URL is set). */
async function startNodes(t: Test, count: number): Promise<{ db: Database; nodes: Node[]; secrets: Set<string> }> {
  const db = await testDatabase(t)
  const shared = { JWT_SECRET: randomBytes(48).toString('base64url'), PHONE_KEY: randomBytes(32).toString('base64') }
  const redisUrl = process.env.TEST_REDIS_URL || undefined
  const secrets = new Set<string>()
  const nodes: Node[] = []
  for (let i = 0; i < count; i++) {
    const dataDir = mkdtempSync(join(tmpdir(), 'maskline-dir-'))
    const config = loadConfig({ PORT: '0', DATA_DIR: dataDir, LOG_LEVEL: 'info', ...shared, ...(redisUrl ? { REDIS_URL: redisUrl } : {}) })
    const lines: string[] = []
    const sink = new Writable({ write(chunk, _enc, cb) { lines.push(String(chunk)); cb() } })
    const svc = await startService({ config, db, logDestination: sink, checkResponses: true, rateLimitPrefix: `maskline:rl:test-dir-${process.pid}-${randomBytes(4).toString('hex')}:` })
    t.teardown(async () => {
      await svc.close()
      rmSync(dataDir, { recursive: true, force: true })
      for (const line of lines) for (const s of [...secrets, shared.JWT_SECRET]) if (line.includes(s)) t.fail('a log line carries a secret or token')
    })
    nodes.push({
      svc, lines,
      async req(method, path, o = {}) {
        const headers: Record<string, string> = {}
        if (o.token) headers.authorization = `Bearer ${o.token}`
        if (o.body !== undefined) headers['content-type'] = 'application/json'
        const r = await fetch(svc.url + path, { method, headers, ...(o.body !== undefined ? { body: JSON.stringify(o.body) } : {}) })
        const text = await r.text()
        return { status: r.status, body: text ? JSON.parse(text) : null }
      },
    })
  }
  return { db, nodes, secrets }
}

async function signup(node: Node, secrets: Set<string>) {
  const tag = randomBytes(6).toString('hex')
  const email = `owner-${tag}@example.test`, password = `pw-${tag}-correct-horse`
  const s = await node.req('POST', '/v1/auth/signup', { body: { companyName: `Dir ${tag}`, email, password } })
  if (s.status !== 201) throw new Error(`signup: ${s.status}`)
  const login = await node.req('POST', '/v1/auth/dashboard/login', { body: { email, password } })
  for (const v of [password, s.body.apiSecret, s.body.accessToken, login.body.accessToken]) secrets.add(v)
  return { tenantId: s.body.tenantId as string, apiKey: s.body.apiKey as string, apiSecret: s.body.apiSecret as string, token: s.body.accessToken as string, owner: login.body.accessToken as string }
}

/** A tenant, straight in the database, with one API key. */
async function tenantWithKey(db: Database, phoneKey: Buffer) {
  const creds = newCredentials(phoneKey)
  const tenantId = uuidv7()
  await createTenantWithOwner(db.pool, {
    tenantId, name: `Tenant ${tenantId}`, salt: randomBytes(32), userId: uuidv7(), email: `owner-${tenantId}@example.test`,
    passwordHash: 'not-a-password', credentialId: uuidv7(), keyHash: creds.keyHash, secretMac: creds.secretMac,
  })
  return { creds, tenantId }
}

/** The pool, with `seen` told of every call made through it (its first argument: the query, for a statement). */
function spyPool<P extends object>(pool: P, seen: (first: unknown) => void): P {
  return new Proxy(pool, {
    get(target, prop) {
      const v = Reflect.get(target, prop, target) as unknown
      if (typeof v !== 'function') return v
      return (...args: unknown[]) => { seen(args[0]); return (v as (...a: unknown[]) => unknown).apply(target, args) }
    },
  })
}

const exchange = (node: Node, apiKey: string, apiSecret: string) => node.req('POST', '/v1/auth/token', { body: { apiKey, apiSecret } })

t.test('one node: a rotation or a suspension applies on the very next request; SQL edited by hand at the next resync', async t => {
  const { db, nodes: [a], secrets } = await startNodes(t, 1)
  const acct = await signup(a!, secrets)
  t.equal((await exchange(a!, acct.apiKey, acct.apiSecret)).status, 200)

  const rotated = await a!.req('POST', '/v1/auth/rotate-key', { token: acct.owner })
  t.equal(rotated.status, 200)
  secrets.add(rotated.body.apiSecret)
  t.equal((await exchange(a!, acct.apiKey, acct.apiSecret)).status, 401, 'the old key is refused at once')
  const fresh = await exchange(a!, rotated.body.apiKey, rotated.body.apiSecret)
  t.equal(fresh.status, 200, 'the new key works at once')
  t.equal((await exchange(a!, rotated.body.apiKey, acct.apiSecret)).status, 401, 'the new key with the old secret: refused')

  t.ok(await a!.svc.tenants.setStatus(acct.tenantId, 'SUSPENDED'))
  t.equal((await a!.req('GET', '/v1/config', { token: fresh.body.accessToken })).status, 403, 'a suspended tenant\'s token: 403 at once')
  t.equal((await exchange(a!, rotated.body.apiKey, rotated.body.apiSecret)).status, 403, 'and its exchange')
  await a!.svc.tenants.setStatus(acct.tenantId, 'ACTIVE')
  t.equal((await a!.req('GET', '/v1/config', { token: fresh.body.accessToken })).status, 200, 'reinstated at once')

  // An edit no node announced (made in SQL by hand, or announced while Redis was away): the resync
  // the service runs on a timer picks it up; until then the directory answers from memory.
  await db.pool.query(sql.unsafe`UPDATE tenants SET status = 'SUSPENDED' WHERE id = ${acct.tenantId}`)
  t.equal((await a!.req('GET', '/v1/config', { token: fresh.body.accessToken })).status, 200, 'not announced: memory still says ACTIVE')
  await a!.svc.tenants.resync()
  t.equal((await a!.req('GET', '/v1/config', { token: fresh.body.accessToken })).status, 403, 'after the resync: suspended')
})

t.test('two nodes: a key rotated or a tenant suspended through node A is refused on node B on the very next request', { skip: singleNode }, async t => {
  // Real Postgres without Redis is a misconfigured services run, not a reason to skip.
  if (!process.env.TEST_REDIS_URL) throw new Error('services mode needs TEST_REDIS_URL: the nodes meet on the Redis bus')
  const { nodes: [a, b], secrets } = await startNodes(t, 2)
  const acct = await signup(a!, secrets)

  // A tenant and a key made on node A a moment ago: node B loads them on first use.
  const first = await exchange(b!, acct.apiKey, acct.apiSecret)
  t.equal(first.status, 200, 'node B exchanges a key node A just made')
  t.equal((await b!.req('GET', '/v1/numbers/pool', { token: first.body.accessToken })).status, 200, 'and takes its token')

  let key = acct.apiKey, secret = acct.apiSecret
  for (let round = 1; round <= 5; round++) {
    t.equal((await exchange(b!, key, secret)).status, 200, `round ${round}: the current key works on node B`)
    const rotated = await a!.req('POST', '/v1/auth/rotate-key', { token: acct.owner })
    t.equal(rotated.status, 200)
    secrets.add(rotated.body.apiSecret)
    t.equal((await exchange(b!, key, secret)).status, 401, `round ${round}: the key rotated through node A is refused on node B at once`)
    key = rotated.body.apiKey
    secret = rotated.body.apiSecret
    t.equal((await exchange(b!, key, secret)).status, 200, `round ${round}: the new key works on node B at once`)
  }

  const token = (await exchange(a!, key, secret)).body.accessToken as string
  secrets.add(token)
  for (let round = 1; round <= 3; round++) {
    t.equal((await b!.req('GET', '/v1/numbers/pool', { token })).status, 200, `round ${round}: active on node B`)
    t.ok(await a!.svc.tenants.setStatus(acct.tenantId, 'SUSPENDED'))
    const refused = await b!.req('GET', '/v1/numbers/pool', { token })
    t.equal(refused.status, 403, `round ${round}: suspended through node A, refused on node B on the next request`)
    t.equal(refused.body.detail, 'The tenant is suspended')
    t.equal((await exchange(b!, key, secret)).status, 403, `round ${round}: node B refuses its token exchange too`)
    await a!.svc.tenants.setStatus(acct.tenantId, 'ACTIVE')
    t.equal((await b!.req('GET', '/v1/numbers/pool', { token })).status, 200, `round ${round}: reinstated through node A, admitted on node B at once`)
  }

  // The other way round: a suspension through node B reaches node A.
  await b!.svc.tenants.setStatus(acct.tenantId, 'SUSPENDED')
  t.equal((await a!.req('GET', '/v1/numbers/pool', { token })).status, 403, 'suspended through node B, refused on node A')
})

t.test('tokens are signed without jose and are the standard HS256 JWT jose makes and verifies', async t => {
  const key = randomBytes(32)
  const now = 1_800_000_000_000
  const token = tokenSigner(key)({ typ: 'tenant', sub: 'cred-1', tenantId: '01890a5d-ac96-774b-bcce-b302099a8057', tier: 'GROWTH', scopes: ['api'] }, now)
  const payload = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString())
  const jose = await new SignJWT({ typ: 'tenant', tenantId: '01890a5d-ac96-774b-bcce-b302099a8057', tier: 'GROWTH', scopes: ['api'] })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT', kid: keyId(key) })
    .setIssuer('maskline').setAudience('maskline:tenant').setSubject('cred-1')
    .setIssuedAt(now / 1000).setExpirationTime(now / 1000 + 900).setJti(payload.jti)
    .sign(key)
  t.equal(token, jose, 'the very bytes SignJWT produces')
  const v = await verifyToken(key, keyId(key), token, now)
  t.same(v, { claims: { typ: 'tenant', sub: 'cred-1', tenantId: '01890a5d-ac96-774b-bcce-b302099a8057', tier: 'GROWTH', scopes: ['api'] }, expMs: now + 900_000 })
})

t.test('a token exchange and a token check ask Postgres nothing once the key and tenant are in the directory', async t => {
  const db = await testDatabase(t)
  const phoneKey = randomBytes(32), jwtSecret = randomBytes(32)
  const { creds, tenantId } = await tenantWithKey(db, phoneKey)
  // Every statement through the directory's pool is counted.
  let statements = 0
  const counting = spyPool(db.pool, () => { statements++ })
  const directory = new TenantDirectory(counting)
  await directory.loadAll()
  const auth = createAuthenticator({ jwtSecret, phoneKey, now: Date.now, directory })
  const booted = statements
  for (let i = 0; i < 50; i++) {
    const r = await auth.exchange(creds.keyHash, creds.apiSecret)
    if (typeof r !== 'object') { t.fail(`exchange ${i}: ${r}`); break }
    const ctx = await auth.authenticate(`Bearer ${r.accessToken}`, 'tenant')
    if (ctx.tenantId !== tenantId) { t.fail('another tenant'); break }
  }
  t.equal(await auth.exchange(creds.keyHash, newCredentials(phoneKey).apiSecret), 'unauthorized', 'a wrong secret is refused')
  t.equal(statements - booted, 0, '50 exchanges and token checks, a wrong secret: no statement')

  // A key this node has not seen (made on another node a moment ago): one lookup, then memory.
  const other = newCredentials(phoneKey)
  await db.pool.query(sql.unsafe`INSERT INTO api_credentials (id, tenant_id, key_hash, secret_mac) VALUES (${uuidv7()}, ${tenantId}, ${sql.binary(other.keyHash)}, ${sql.binary(other.secretMac)})`)
  const before = statements
  t.type(await auth.exchange(other.keyHash, other.apiSecret), 'object', 'a key made elsewhere works')
  t.type(await auth.exchange(other.keyHash, other.apiSecret), 'object')
  t.equal(statements - before, 1, 'loaded once, then from memory')
})

t.test('resync: credentials reloaded only when they changed, and every kind of change is caught', async t => {
  const db = await testDatabase(t)
  const phoneKey = randomBytes(32)
  const { creds, tenantId } = await tenantWithKey(db, phoneKey)
  // The statements through the directory's pool that load every live credential.
  let fullLoads = 0
  const counting = spyPool(db.pool, query => {
    const text = (query as { sql?: string } | undefined)?.sql ?? ''
    if (/FROM api_credentials WHERE revoked_at IS NULL\s*$/.test(text) && text.includes('key_hash, secret_mac')) fullLoads++
  })
  const directory = new TenantDirectory(counting)
  await directory.loadAll()
  t.equal(fullLoads, 1, 'the boot loads them')
  /** In memory (a value, not a lookup's promise), as resync() left it. */
  const held = (keyHash: Buffer) => {
    const c = directory.credential(keyHash)
    return c instanceof Promise ? 'not held' : c
  }
  t.match(held(creds.keyHash), { tenantId, keyHash: creds.keyHash, secretMac: creds.secretMac })

  await directory.resync()
  await directory.resync()
  t.equal(fullLoads, 1, 'nothing changed: two resyncs, no reload')

  // Added by hand (no node announced it): picked up by the next resync, not by a lookup.
  const added = newCredentials(phoneKey)
  const addedId = uuidv7()
  await db.pool.query(sql.unsafe`INSERT INTO api_credentials (id, tenant_id, key_hash, secret_mac) VALUES (${addedId}, ${tenantId}, ${sql.binary(added.keyHash)}, ${sql.binary(added.secretMac)})`)
  await directory.resync()
  t.equal(fullLoads, 2, 'a key added: reloaded')
  t.same(held(added.keyHash), { id: addedId, tenantId, keyHash: added.keyHash, secretMac: added.secretMac })

  // Edited in place: the same row, another secret MAC.
  const edited = newCredentials(phoneKey).secretMac
  await db.pool.query(sql.unsafe`UPDATE api_credentials SET secret_mac = ${sql.binary(edited)} WHERE id = ${addedId}`)
  await directory.resync()
  t.equal(fullLoads, 3, 'a key edited in place: reloaded')
  t.same((held(added.keyHash) as { secretMac: Buffer }).secretMac, edited)

  // Revoked by hand: gone from memory (a lookup then asks Postgres, which says no).
  await db.pool.query(sql.unsafe`UPDATE api_credentials SET revoked_at = now() WHERE id = ${addedId}`)
  await directory.resync()
  t.equal(fullLoads, 4, 'a key revoked: reloaded')
  t.equal(held(added.keyHash), 'not held')
  t.equal(await directory.credential(added.keyHash), null)

  await directory.resync()
  t.equal(fullLoads, 4, 'and quiet again')
})
