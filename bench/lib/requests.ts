// The request files of each scenario, built from the synthetic population. Callbacks are signed
// exactly as the provider would sign them (test/support/callback-driver.ts), REST calls carry the
// tenant's token. Each callback has its own provider id (CallSid, message id), so the service
// does the full work for it; only when a run outlasts the file does wrk start over and replay
// ids, and the runner reports that share.
import { encodeForm } from '../../api/cpaas/form.js'
import { CALLBACK_BASE_PATH, CallbackDriver, telnyxSmsReceivedBody, type SigningMode, type TelnyxKeyPair } from '../../test/support/callback-driver.js'
import { writeRequestFile } from './request-file.js'
import { agentOf, customerOf, proxyOf, sessionIdOf, tenantOfSession, type Credential, type Population } from './population.js'

export const HOST = '127.0.0.1'

/** Stateless 32-bit mix: the k-th request targets session mix(k) % sessions. */
export function mix(i: number): number {
  let x = (i + 0x9e3779b9) | 0
  x = Math.imul(x ^ (x >>> 16), 0x85ebca6b)
  x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35)
  return (x ^ (x >>> 16)) >>> 0
}

export interface Signing {
  mode: SigningMode
  keyPair: TelnyxKeyPair
  hmacSecret: string
  /** PUBLIC_BASE_URL of the service: hmac-sha1 signs it. */
  publicBaseUrl: string
}

function driver(s: Signing): CallbackDriver {
  return new CallbackDriver({ baseUrl: s.publicBaseUrl, mode: s.mode, keyPair: s.keyPair, hmacSecret: s.hmacSecret, publicBaseUrl: s.publicBaseUrl })
}

/** A live (proxy, caller) pair: half the calls come from the agent, half from the customer. */
function party(k: number, p: Population): { i: number; proxy: string; caller: string; other: string } {
  const i = mix(k) % p.sessions
  const fromAgent = (k & 1) === 0
  return { i, proxy: proxyOf(i, p.proxies), caller: fromAgent ? agentOf(i) : customerOf(i), other: fromAgent ? customerOf(i) : agentOf(i) }
}

/** POST /voice, the inbound call fetch (contract D5), signed per `s.mode`. `tag` keeps CallSids unique per file. */
export function writeVoiceFile(path: string, count: number, p: Population, s: Signing, tag: string): void {
  const d = driver(s)
  const voicePath = `${CALLBACK_BASE_PATH}/voice`
  writeRequestFile(path, HOST, count, k => {
    const { proxy, caller } = party(k, p)
    const body = encodeForm({ AccountSid: 'bench-account', CallSid: `v3:${tag}-${k}`, From: caller, To: proxy, CallStatus: 'ringing', Direction: 'inbound' })
    const signed = d.sign(voicePath, '', body, 'application/x-www-form-urlencoded')
    return { method: 'POST', path: voicePath, headers: { 'content-type': 'application/x-www-form-urlencoded', ...signed.headers }, body }
  })
}

/** POST /sms with a Telnyx `message.received` JSON body, Ed25519-signed with a fresh timestamp. */
export function writeSmsFile(path: string, count: number, p: Population, s: Signing, tag: string, offset = 0): void {
  const d = driver(s)
  const smsPath = `${CALLBACK_BASE_PATH}/sms`
  writeRequestFile(path, HOST, count, k => {
    const { proxy, caller } = party(offset + k, p)
    const body = telnyxSmsReceivedBody({ from: caller, to: proxy, text: `bench ${tag} ${k}`, messageId: `${tag}-${k}` })
    const signed = d.sign(smsPath, '', body, 'application/json')
    return { method: 'POST', path: smsPath + (signed.query ? `?${signed.query}` : ''), headers: { 'content-type': 'application/json', ...signed.headers }, body }
  })
}

/** GET /v1/sessions/:id of random live sessions, each with its tenant's token. */
export function writeGetSessionFile(path: string, count: number, p: Population, tokens: readonly string[]): void {
  writeRequestFile(path, HOST, count, k => {
    const i = mix(k + 0x5eed) % p.sessions
    return { method: 'GET', path: `/v1/sessions/${sessionIdOf(i)}`, headers: { authorization: `Bearer ${tokens[tenantOfSession(i, p)]}` } }
  })
}

/** POST /v1/auth/token, one API key after the other (each may exchange 10 times a minute, contract 8.4). */
export function writeTokenFile(path: string, creds: readonly Credential[]): void {
  writeRequestFile(path, HOST, creds.length, k => ({
    method: 'POST', path: '/v1/auth/token', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ apiKey: creds[k]!.apiKey, apiSecret: creds[k]!.apiSecret }),
  }))
}

/** A party number outside the population's ranges: `series` picks the area code. */
export function freshNumber(series: 505 | 606 | 707, k: number): string {
  return `+1${series}${String(1_000_000 + k).padStart(7, '0')}`
}

/** POST /v1/sessions with parties nobody uses yet, tenants in turn. */
export function writeCreateFile(path: string, count: number, p: Population, tokens: readonly string[], offset = 0): void {
  writeRequestFile(path, HOST, count, k => ({
    method: 'POST', path: '/v1/sessions', headers: { 'content-type': 'application/json', authorization: `Bearer ${tokens[(offset + k) % p.tenants]}` },
    body: JSON.stringify({ agentPhone: freshNumber(505, offset + k), customerPhone: freshNumber(606, offset + k) }),
  }))
}
