// SSRF guard for tenant webhook targets (contract D6): `https://` only, and every address the
// host resolves to must be public. The check runs on the URL (IP literals, including the
// decimal/hex/octal spellings the WHATWG parser normalises), again on every DNS answer inside the
// connection's own `lookup` (so the socket connects to the address that was checked: no second
// resolution an attacker's DNS could answer differently), and redirects are never followed.
// `allowInsecure` (WEBHOOK_ALLOW_INSECURE, development and tests only) lifts both rules.
import { lookup as dnsLookup, type LookupAddress } from 'node:dns'
import { isIP } from 'node:net'
import { MasklineError } from '../../engine/errors.js'

export type AddressClass =
  | 'public' | 'unspecified' | 'loopback' | 'private' | 'link-local' | 'metadata' | 'cgnat'
  | 'unique-local' | 'multicast' | 'broadcast' | 'reserved' | 'documentation' | 'invalid'

/**
 * Parses an IPv4 address the way inet_aton (and so getaddrinfo and the WHATWG URL parser) does:
 * 1 to 4 parts, each decimal, `0x` hex or leading-zero octal; the last part fills the remaining
 * bytes. `2130706433`, `0x7f.1` and `0177.0.0.1` are all 127.0.0.1.
 */
export function parseIPv4(input: string): number[] | null {
  const parts = input.split('.')
  if (parts.length < 1 || parts.length > 4) return null
  const nums: number[] = []
  for (const p of parts) {
    let n: number
    if (/^0x[0-9a-f]*$/i.test(p)) n = p.length === 2 ? 0 : parseInt(p.slice(2), 16)
    else if (/^0[0-7]+$/.test(p)) n = parseInt(p.slice(1), 8)
    else if (/^(0|[1-9]\d*)$/.test(p)) n = Number(p)
    else return null
    if (!Number.isSafeInteger(n)) return null
    nums.push(n)
  }
  const last = nums.pop()!
  if (nums.some(n => n > 255)) return null
  const restBytes = 4 - nums.length
  if (last >= 2 ** (8 * restBytes)) return null
  const out = [...nums]
  for (let i = restBytes - 1; i >= 0; i--) out.push(Math.floor(last / 2 ** (8 * i)) % 256)
  return out
}

/** 16 bytes, or null. Accepts `::` compression, a dotted IPv4 tail, a `%zone` and brackets. */
export function parseIPv6(input: string): number[] | null {
  let s = input.startsWith('[') && input.endsWith(']') ? input.slice(1, -1) : input
  const zone = s.indexOf('%')
  if (zone >= 0) s = s.slice(0, zone)
  if (!s.includes(':')) return null
  let tail: number[] = []
  const lastColon = s.lastIndexOf(':')
  if (s.slice(lastColon + 1).includes('.')) {
    const dotted = s.slice(lastColon + 1)
    if (!/^\d{1,3}(\.\d{1,3}){3}$/.test(dotted)) return null
    const v4 = dotted.split('.').map(Number)
    if (v4.some(n => n > 255)) return null
    tail = v4
    s = s.slice(0, lastColon + 1) + '0:0' // placeholder groups, replaced below
  }
  const halves = s.split('::')
  if (halves.length > 2) return null
  const groups = (h: string) => (h === '' ? [] : h.split(':'))
  const head = groups(halves[0]!)
  const rest = halves.length === 2 ? groups(halves[1]!) : []
  const total = head.length + rest.length
  if (halves.length === 1 ? total !== 8 : total > 7) return null
  const all = [...head, ...Array<string>(8 - total).fill('0'), ...rest]
  const bytes: number[] = []
  for (const g of all) {
    if (!/^[0-9a-f]{1,4}$/i.test(g)) return null
    const n = parseInt(g, 16)
    bytes.push(n >> 8, n & 0xff)
  }
  if (tail.length) bytes.splice(12, 4, ...tail)
  return bytes
}

const inV4 = (b: number[], net: [number, number, number, number], bits: number): boolean => {
  for (let i = 0; i < 4; i++) {
    const take = Math.max(0, Math.min(8, bits - i * 8))
    if (take === 0) return true
    const mask = (0xff << (8 - take)) & 0xff
    if ((b[i]! & mask) !== (net[i]! & mask)) return false
  }
  return true
}

/** Cloud metadata endpoints (AWS/GCP/Azure/OCI, ECS task metadata, Alibaba). */
const METADATA_V4 = ['169.254.169.254', '169.254.170.2', '100.100.100.200']

function classifyIPv4(b: number[]): AddressClass {
  if (METADATA_V4.includes(b.join('.'))) return 'metadata'
  if (inV4(b, [0, 0, 0, 0], 8)) return 'unspecified'            // "this network"
  if (inV4(b, [10, 0, 0, 0], 8)) return 'private'
  if (inV4(b, [100, 64, 0, 0], 10)) return 'cgnat'
  if (inV4(b, [127, 0, 0, 0], 8)) return 'loopback'
  if (inV4(b, [169, 254, 0, 0], 16)) return 'link-local'
  if (inV4(b, [172, 16, 0, 0], 12)) return 'private'
  if (inV4(b, [192, 0, 0, 0], 24)) return 'reserved'              // IETF protocol assignments
  if (inV4(b, [192, 0, 2, 0], 24)) return 'documentation'
  if (inV4(b, [192, 88, 99, 0], 24)) return 'reserved'            // 6to4 relay anycast
  if (inV4(b, [192, 168, 0, 0], 16)) return 'private'
  if (inV4(b, [198, 18, 0, 0], 15)) return 'reserved'             // benchmarking
  if (inV4(b, [198, 51, 100, 0], 24)) return 'documentation'
  if (inV4(b, [203, 0, 113, 0], 24)) return 'documentation'
  if (inV4(b, [224, 0, 0, 0], 4)) return 'multicast'
  if (b.every(x => x === 255)) return 'broadcast'
  if (inV4(b, [240, 0, 0, 0], 4)) return 'reserved'
  return 'public'
}

function classifyIPv6(b: number[]): AddressClass {
  const word = (i: number) => (b[i * 2]! << 8) | b[i * 2 + 1]!
  const zeros = (from: number, to: number) => b.slice(from, to).every(x => x === 0)
  if (zeros(0, 16)) return 'unspecified'
  if (zeros(0, 15) && b[15] === 1) return 'loopback'
  // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (deprecated compatible): the IPv4 address decides
  if (zeros(0, 10) && b[10] === 0xff && b[11] === 0xff) return classifyIPv4(b.slice(12))
  if (zeros(0, 12)) return classifyIPv4(b.slice(12)) === 'public' ? 'reserved' : classifyIPv4(b.slice(12))
  // 64:ff9b::/96 NAT64: the embedded IPv4 address is where the packet really goes
  if (word(0) === 0x64 && word(1) === 0xff9b && zeros(4, 12)) return classifyIPv4(b.slice(12))
  if (word(0) === 0x64 && word(1) === 0xff9b && word(2) === 1) return 'reserved' // local-use NAT64
  // fd00:ec2::254, AWS metadata over IPv6 (inside fc00::/7, named for clarity)
  if (word(0) === 0xfd00 && word(1) === 0x0ec2 && zeros(4, 14) && word(7) === 0x254) return 'metadata'
  if ((b[0]! & 0xfe) === 0xfc) return 'unique-local'
  if (b[0] === 0xfe && (b[1]! & 0xc0) === 0x80) return 'link-local'
  if (b[0] === 0xfe && (b[1]! & 0xc0) === 0xc0) return 'private'  // deprecated site-local
  if (b[0] === 0xff) return 'multicast'
  if (word(0) === 0x2001 && word(1) === 0x0db8) return 'documentation'
  if (word(0) === 0x3fff && (word(1) & 0xf000) === 0) return 'documentation' // 3fff::/20
  // 2002::/16 6to4 carries an IPv4 address in bytes 2..5
  if (word(0) === 0x2002) return classifyIPv4(b.slice(2, 6))
  if (word(0) === 0x2001 && word(1) < 0x0200) return 'reserved'   // 2001::/23 (Teredo, ORCHID...)
  if ((b[0]! & 0xe0) !== 0x20) return 'reserved'                 // outside global unicast 2000::/3
  return 'public'
}

/** Classifies a literal address (IPv4 in any inet_aton spelling, or IPv6). */
export function classifyAddress(address: string): AddressClass {
  const v6 = address.includes(':') ? parseIPv6(address) : null
  if (v6) return classifyIPv6(v6)
  const v4 = address.includes(':') ? null : parseIPv4(address)
  return v4 ? classifyIPv4(v4) : 'invalid'
}

export const isPublicAddress = (address: string): boolean => classifyAddress(address) === 'public'

export type UrlRefusal = 'invalid-url' | 'insecure-scheme' | 'credentials-in-url' | 'blocked-address'

/** Host names that are local by definition, whatever DNS says. */
const LOCAL_NAMES = /(^|\.)(localhost|localdomain|internal|local|home\.arpa)$|^metadata(\.google\.internal)?$/i

/**
 * Checks a target URL before it is stored and again before each attempt. Host names are
 * resolved later, in `pinnedLookup`, on the connection itself.
 */
export function checkWebhookUrl(
  raw: string,
  opts: { allowInsecure: boolean },
): { ok: true; url: URL } | { ok: false; reason: UrlRefusal } {
  let url: URL
  try { url = new URL(raw) } catch { return { ok: false, reason: 'invalid-url' } }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return { ok: false, reason: 'invalid-url' }
  if (!url.hostname) return { ok: false, reason: 'invalid-url' }
  // Credentials in a URL end up in logs and delivery rows; the signature is the authentication.
  if (url.username || url.password) return { ok: false, reason: 'credentials-in-url' }
  if (opts.allowInsecure) return { ok: true, url }
  if (url.protocol !== 'https:') return { ok: false, reason: 'insecure-scheme' }
  const host = url.hostname.replace(/\.$/, '')
  if (LOCAL_NAMES.test(host)) return { ok: false, reason: 'blocked-address' }
  // The WHATWG parser already turned 0x7f.1 or 2130706433 into 127.0.0.1; IPv6 keeps brackets.
  if (isIP(host.replace(/^\[|\]$/g, '')) && !isPublicAddress(host)) return { ok: false, reason: 'blocked-address' }
  return { ok: true, url }
}

/** Handed to the socket's lookup callback, so its code is errno-shaped, as the callback expects. */
class BlockedAddressError extends MasklineError {
  constructor() { super('EBLOCKEDADDRESS', 'webhook target resolves to a non-public address') }
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void

/** dns.lookup with `all: true`; tests substitute a fixed table. */
export type Resolver = (
  hostname: string,
  options: { all: true; family: 0 | 4 | 6 },
  callback: (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void,
) => void

/**
 * A `lookup` for net/tls connect options: resolves, refuses the whole answer if any address is
 * not public (a mixed answer is an attack, not a misconfiguration), and hands the checked
 * addresses to the socket. Node 20's autoSelectFamily asks with `all: true`.
 */
export function pinnedLookup(allowInsecure: boolean, resolve: Resolver = dnsLookup) {
  return (hostname: string, options: { family?: number | string; all?: boolean }, callback: LookupCallback): void => {
    const family = options.family === 'IPv4' ? 4 : options.family === 'IPv6' ? 6 : Number(options.family ?? 0)
    resolve(hostname, { all: true, family: family as 0 | 4 | 6 }, (err, addresses) => {
      if (err) return callback(err, [])
      if (!addresses.length) return callback(Object.assign(new Error('no address'), { code: 'ENOTFOUND' }), [])
      if (!allowInsecure && addresses.some(a => !isPublicAddress(a.address))) return callback(new BlockedAddressError(), [])
      if (options.all) return callback(null, addresses)
      callback(null, addresses[0]!.address, addresses[0]!.family)
    })
  }
}
