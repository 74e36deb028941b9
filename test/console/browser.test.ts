// README.md, Operator console: the operator console in a real browser (Debian chromium through puppeteer-core) against
// the whole service: log in as the OWNER, see a call placed through the provider callbacks reach
// the live chart and the session's timeline within 2 s, end the session from the page, then log in
// as an OPERATOR (no action buttons; the API refuses the actions) and scan every page for the real
// numbers the test used. Screenshots of each page go to test/artifacts/console/ (gitignored). A
// page that renders blank or logs a console error fails. Skipped only when no chromium exists.
import t from 'tap'
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { sql } from 'slonik'
import { hashPassword } from '../../api/auth/passwords.js'
import { uuidv7 } from '../../sql/vocabulary/ids.js'
import { missing } from '../support/missing.js'
import { startTestService } from '../support/service.js'
import { startWebhookReceiver } from '../support/webhook-receiver.js'

// Browser globals, in the callbacks chromium runs (page.evaluate, waitForFunction): the root
// tsconfig has no DOM lib, and only these few are used.
declare const document: { documentElement: { outerHTML: string }; body: { innerText: string }; querySelector(s: string): { textContent: string | null; getAttribute(n: string): string | null } | null; querySelectorAll(s: string): { length: number } }
declare const sessionStorage: { getItem(key: string): string | null }

const CHROMIUM = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'].find(p => p && existsSync(p))
const ARTIFACTS = fileURLToPath(new URL('../artifacts/console/', import.meta.url))
const LIVE_MS = 2_000 // A call appears within 2 s

if (!CHROMIUM) {
  t.test('the console, in chromium', { skip: missing('a chromium binary (/usr/bin/chromium): apt-get install chromium, or set CHROMIUM_PATH') }, () => {})
} else {
  void t.test('the console, in chromium', { timeout: 120_000 }, async t => {
    const puppeteer = (await import('puppeteer-core')).default
    // One US proxy, which the sessions below share (their parties differ): US has none free (the < 20 % warning), GB all.
    const api = await startTestService(t, { env: { NUMBER_POOL: 'US:+12025550100;GB:+447700900100-+447700900109' } })
    const owner = await api.signup()
    const operator = { email: `operator-${process.pid}@example.test`, password: 'operator-correct-horse' }
    api.secrets.add(operator.password)
    await api.svc.db.pool.query(sql.unsafe`INSERT INTO users (id, tenant_id, email, password_hash, role)
      VALUES (${uuidv7()}, ${owner.tenantId}, ${operator.email}, ${await hashPassword(operator.password)}, 'OPERATOR')`)
    const receiver = await startWebhookReceiver()
    t.teardown(() => receiver.close())
    t.equal((await api.req('POST', '/v1/webhooks', { token: owner.token, body: { url: receiver.url, events: ['call.ended'] } })).status, 201)

    const A = api.phone(11), B = api.phone(12), B2 = api.phone(13), A3 = api.phone(14), B3 = api.phone(15)
    const realNumbers = [A, B, B2, A3, B3]
    const created = await api.req('POST', '/v1/sessions', { token: owner.token, body: { agentPhone: A, customerPhone: B } })
    t.equal(created.status, 201)
    const s = created.body as { id: string; proxyNumber: string }
    const s3 = (await api.req('POST', '/v1/sessions', { token: owner.token, body: { agentPhone: A3, customerPhone: B3 } })).body as { id: string }

    mkdirSync(ARTIFACTS, { recursive: true })
    const profile = mkdtempSync(join(tmpdir(), 'maskline-chromium-'))
    const browser = await puppeteer.launch({
      executablePath: CHROMIUM,
      headless: true,
      userDataDir: profile,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
        '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
    })
    t.teardown(async () => { await browser.close(); rmSync(profile, { recursive: true, force: true }) })

    const consoleErrors: string[] = []
    const page = await browser.newPage()
    await page.setViewport({ width: 1280, height: 900 })
    page.on('console', m => { if (m.type() === 'error') consoleErrors.push(m.text()) })
    page.on('pageerror', e => consoleErrors.push(`pageerror: ${(e as Error).message}`))
    page.on('requestfailed', r => consoleErrors.push(`request failed: ${r.url()} ${r.failure()?.errorText}`))

    /** A page is done when it has content and nothing went to the console as an error. */
    async function checkPage(name: string, root: string) {
      await page.waitForSelector(root, { timeout: 5_000 })
      await new Promise(r => setTimeout(r, 300)) // let the page's fetches land
      const text = await page.$eval('#app', el => (el as { innerText: string }).innerText.trim())
      t.ok(text.length > 20, `${name} is not blank`)
      await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true })
      t.same(consoleErrors, [], `${name}: no console errors`)
      await scanForNumbers(name)
    }
    /** Neither the markup nor the text of the page holds a real number, in any common spelling. */
    async function scanForNumbers(name: string) {
      const dom = await page.evaluate(() => document.documentElement.outerHTML + '\n' + document.body.innerText)
      for (const n of realNumbers) {
        const digits = n.slice(1)
        for (const form of [n, digits, digits.slice(1), `${digits.slice(1, 4)}-${digits.slice(4, 7)}-${digits.slice(7)}`]) {
          t.notOk(dom.includes(form), `${name}: the page does not show ${form.slice(0, 3)}… (a real number)`)
        }
      }
      t.notMatch(dom, /eyJ[A-Za-z0-9_-]{10,}\./, `${name}: no JWT in the page`)
    }
    async function login(email: string, password: string) {
      await page.goto(`${api.url}/console`, { waitUntil: 'load' })
      await page.waitForSelector('#login-form')
      await page.type('#login-email', email)
      await page.type('#login-password', password)
      await page.click('#login-submit')
      await page.waitForSelector('#page-overview')
      await page.waitForSelector('#live-status.up', { timeout: 5_000 })
    }
    const chartCalls = () => page.$eval('#activity-chart', el => Number(el.getAttribute('data-total-calls')))
    let n = 0
    /** A whole inbound call through the provider callbacks: B calls the proxy, A answers, 42 s. */
    async function placeCall() {
      const callSid = `v3:console-${++n}`
      const xml = await (await api.driver.voice({ from: B, to: s.proxyNumber, callSid })).text()
      const callId = /callId=([0-9a-f-]{36})/.exec(xml)?.[1]
      if (!callId) throw new Error('the call was not routed')
      return {
        callId,
        async complete() {
          await api.driver.status({ callId, callSid: `${callSid}-leg`, callStatus: 'in-progress', parentCallSid: callSid })
          await api.driver.dialStatus({ callId, callSid, dialCallStatus: 'completed', dialCallSid: `${callSid}-leg`, dialCallDuration: 42 })
        },
      }
    }

    await t.test('the page is served with its CSP and logs in', async t => {
      const res = await page.goto(`${api.url}/console`, { waitUntil: 'load' })
      t.equal(res?.status(), 200)
      t.match(res?.headers()['content-security-policy'], /script-src 'self'/)
      await checkPage('login', '#login-form')
      await page.type('#login-email', owner.email)
      await page.type('#login-password', 'not-the-password')
      await page.click('#login-submit')
      await page.waitForSelector('#login-error')
      consoleErrors.length = 0 // the refused login's 401 is logged by chromium as a failed resource
      await login(owner.email, owner.password)
      t.equal(await page.$eval('#user-role', el => el.textContent), 'OWNER')
    })

    await t.test('Overview: a call placed through the callbacks reaches the live chart within 2 s', async t => {
      await page.waitForSelector('#activity-chart canvas')
      await page.waitForFunction(() => document.querySelector('#sessions-by-state [data-state="ACTIVE"] .value')?.textContent !== '…')
      const before = await chartCalls()
      const t0 = Date.now()
      const call = await placeCall()
      await page.waitForFunction(b => Number(document.querySelector('#activity-chart')?.getAttribute('data-total-calls')) > b, { timeout: LIVE_MS, polling: 20 }, before)
      t.ok(Date.now() - t0 <= LIVE_MS, `on the chart after ${Date.now() - t0} ms`)
      t.equal(await chartCalls(), before + 1)
      await call.complete()
      const smsBefore = await page.$eval('#activity-chart', el => Number(el.getAttribute('data-total-sms')))
      const t1 = Date.now()
      await api.driver.smsReceived({ from: A, to: s.proxyNumber, text: 'running late', messageId: `console-sms-${process.pid}` })
      await page.waitForFunction(b => Number(document.querySelector('#activity-chart')?.getAttribute('data-total-sms')) > b, { timeout: LIVE_MS, polling: 20 }, smsBefore)
      t.ok(Date.now() - t1 <= LIVE_MS, `an SMS on the chart after ${Date.now() - t1} ms`)
      await page.waitForSelector('#pool tr[data-region="US"].low .badge.warn')
      t.equal(await page.$('#pool tr[data-region="GB"].low'), null, 'a region with free numbers has no warning')
      await page.waitForSelector('#circuits [data-provider]')
      await checkPage('overview', '#page-overview #webhook-health')
    })

    await t.test('Sessions: the list, then the timeline updating live', async t => {
      await page.click('#nav-sessions')
      await page.waitForSelector(`#session-list tr[data-session="${s.id}"]`)
      await checkPage('sessions', '#page-sessions #session-list')
      await page.click(`#session-list tr[data-session="${s.id}"] a`)
      await page.waitForSelector('#timeline li[data-kind="call"][data-status="COMPLETED"]')
      const timelineText = await page.$eval('#timeline', el => (el as { innerText: string }).innerText)
      t.match(timelineText, /Customer \(B\) → Agent \(A\): completed, 42 s/)
      t.match(timelineText, /SMS Agent \(A\) → Customer \(B\): (queued|sent|delivered)/, 'the SMS with its status')
      await page.click('#extend-grace')
      await page.waitForFunction(() => document.querySelector('#action-notice')?.textContent === 'Extend grace: done')
      await page.waitForFunction(() => /30 min/.test(document.querySelector('#session-detail .facts')?.textContent ?? ''))
      const t0 = Date.now()
      const call = await placeCall()
      await page.waitForFunction(() => document.querySelectorAll('#timeline li[data-kind="call"]').length === 2, { timeout: LIVE_MS, polling: 20 })
      t.ok(Date.now() - t0 <= LIVE_MS, `on the timeline after ${Date.now() - t0} ms`)
      await call.complete()
      await page.waitForFunction(() => document.querySelectorAll('#timeline li[data-kind="call"][data-status="COMPLETED"]').length === 2, { timeout: LIVE_MS, polling: 20 })
      // a swap from the page: the number typed is sent and not kept
      await page.type('#swap-target', B2)
      await page.click('#swap-form button')
      await page.waitForSelector('#timeline li[data-kind="swap"]', { timeout: LIVE_MS })
      t.equal(await page.$eval('#swap-target', el => (el as { value: string }).value), '', 'the swap field is emptied')
      await checkPage('session-timeline', '#session-detail #session-actions')
    })

    await t.test('Sessions: the OWNER ends the session from the page', async t => {
      await page.click('#end-session')
      await page.waitForSelector('#session-detail[data-state="GRACE_PERIOD"]', { timeout: LIVE_MS })
      await page.waitForSelector('#timeline li[data-kind="ended"]')
      const got = await api.req('GET', `/v1/sessions/${s.id}`, { token: owner.token })
      t.equal(got.body.state, 'GRACE_PERIOD', 'the API agrees')
      await checkPage('session-ended', '#session-detail')
      await page.click('#nav-sessions')
      await page.waitForSelector(`#session-list tr[data-session="${s3.id}"]`)
      const listed = () => page.$$eval('#session-list tr[data-session]', rows => rows.map(r => r.getAttribute('data-session')))
      t.same((await listed()).sort(), [s.id, s3.id].sort(), 'both sessions, unfiltered')
      await page.select('#state-filter', 'GRACE_PERIOD')
      await page.waitForFunction(id => !document.querySelector(`#session-list tr[data-session="${id}"]`), {}, s3.id)
      t.same(await listed(), [s.id], 'the state filter: GRACE_PERIOD')
      await page.select('#state-filter', 'ACTIVE')
      await page.waitForFunction(id => !document.querySelector(`#session-list tr[data-session="${id}"]`), {}, s.id)
      t.same(await listed(), [s3.id], 'the state filter: ACTIVE')
      await page.select('#state-filter', '')
    })

    await t.test('Webhooks: configuration, send test, delivery log', async t => {
      await page.click('#nav-webhooks')
      await page.waitForSelector('#webhook-url')
      t.equal(await page.$eval('#webhook-url', el => el.textContent), receiver.url)
      await page.click('#send-test')
      await page.waitForSelector('#webhook-notice')
      await receiver.waitFor(2, 5_000) // call.ended of the first call, then the test event
      await page.waitForFunction(() => /session\.created/.test(document.querySelector('#delivery-log tbody')?.textContent ?? ''), { timeout: 8_000 })
      const secret = await page.evaluate(() => document.body.innerText.includes('whsec_'))
      t.notOk(secret, 'the signing secret is not shown')
      await checkPage('webhooks', '#page-webhooks #delivery-log')
    })

    await t.test('Twilio Proxy: the OWNER issues the façade credentials, the token shown once', async t => {
      await page.click('#nav-twilio')
      await page.waitForSelector('#twilio-account-sid')
      await page.click('#twilio-issue')
      await page.waitForSelector('#twilio-auth-token code')
      const token = await page.$eval('#twilio-auth-token code', el => el.textContent ?? '')
      api.secrets.add(token)
      t.match(token, /^[0-9a-f]{32}$/)
      t.match(await page.$eval('#twilio-account-sid', el => el.textContent), /^AC[0-9a-f]{32}$/)
      await checkPage('twilio', '#page-twilio #twilio-proxy')
    })

    await t.test('an OPERATOR reads and cannot act, on the page and through the API', async t => {
      await page.click('#logout')
      await page.waitForSelector('#login-form')
      await login(operator.email, operator.password)
      t.equal(await page.$eval('#user-role', el => el.textContent), 'OPERATOR')
      await page.goto(`${api.url}/console#/sessions/${s.id}`, { waitUntil: 'load' })
      await page.waitForSelector('#timeline li[data-kind="call"]')
      t.equal(await page.$('#session-actions'), null, 'no action buttons')
      t.equal(await page.$('#end-session'), null)
      await checkPage('session-operator', '#session-detail')
      await page.goto(`${api.url}/console#/webhooks`, { waitUntil: 'load' })
      await page.waitForSelector('#webhook-url')
      t.equal(await page.$('#send-test'), null, 'no send test')
      await checkPage('webhooks-operator', '#page-webhooks')

      const token = await page.evaluate(() => (JSON.parse(sessionStorage.getItem('maskline.console')!) as { accessToken: string }).accessToken)
      api.secrets.add(token)
      for (const [method, path, body] of [
        ['POST', `/v1/console/sessions/${s.id}/end`, undefined],
        ['PATCH', `/v1/console/sessions/${s.id}`, { gracePeriodMinutes: 60 }],
        ['PATCH', `/v1/console/sessions/${s.id}/target`, { customerPhone: B }],
        ['POST', '/v1/console/webhooks/test', undefined],
      ] as const) {
        const r = await api.req(method, path, { token, ...(body ? { body } : {}) })
        t.equal(r.status, 403, `${method} ${path} is refused to an OPERATOR`)
        t.match(r.body, { type: /\/errors\/forbidden$/, status: 403 })
      }
      t.equal((await api.req('GET', `/v1/console/sessions/${s.id}`, { token })).status, 200, 'and reads')
    })
  })
}
