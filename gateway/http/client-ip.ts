// Which address a request comes from, for the per-address throttles (contract 8.4). X-Forwarded-For
// is believed only from TRUSTED_PROXY (contract D1): believing it from any loopback peer let a
// client behind nothing name a new address per attempt and never be throttled (contract 8.4).
import { isIP } from 'node:net'
import { parseIPv4, parseIPv6 } from '../../api/webhooks/ssrf.js'

/**
 * One spelling per address, so `127.0.0.1`, `::ffff:127.0.0.1` and uWS's
 * `0000:0000:0000:0000:0000:ffff:7f00:0001` compare equal: IPv4 (mapped included) dotted, IPv6
 * as eight hex groups without compression. Null when `text` is not an IP address.
 */
export function canonicalIp(text: string): string | null {
  const s = text.trim()
  if (isIP(s) === 4) return s
  const v6 = s.includes(':') ? parseIPv6(s) : null
  if (!v6) {
    const v4 = /^[0-9.]+$/.test(s) ? parseIPv4(s) : null
    return v4 ? v4.join('.') : null
  }
  if (v6.slice(0, 10).every(b => b === 0) && v6[10] === 0xff && v6[11] === 0xff) return v6.slice(12).join('.')
  const groups: string[] = []
  for (let i = 0; i < 16; i += 2) groups.push(((v6[i]! << 8) | v6[i + 1]!).toString(16))
  return groups.join(':')
}

export interface ClientIpResolver {
  /** The client address of a request from `peer` (the socket's address as uWS spells it). */
  (peer: string, forwardedFor: string | undefined): string
  /** Peers whose spelling is cached (docs/memory-bounds.md: at most PEER_CACHE_MAX). */
  readonly cachedPeers: number
}

/** Peers whose canonical spelling was looked up, kept up to this many. */
export const PEER_CACHE_MAX = 1024

/**
 * Without trusted proxies the peer address is the client, whatever the headers say. With them,
 * a request from one of them is attributed to the rightmost X-Forwarded-For entry that is not
 * itself a trusted proxy: entries to its left were written by the client and prove nothing.
 */
export function clientIpResolver(trustedProxies: readonly string[] | undefined): ClientIpResolver {
  const trusted = new Set<string>()
  for (const p of trustedProxies ?? []) {
    const c = canonicalIp(p)
    if (!c) throw new Error(`not an IP address: ${p}`)
    trusted.add(c)
  }
  if (trusted.size === 0) return Object.assign((peer: string) => peer, { cachedPeers: 0 })
  const peers = new Map<string, boolean>()
  const isTrusted = (peer: string): boolean => {
    let known = peers.get(peer)
    if (known === undefined) {
      known = trusted.has(canonicalIp(peer) ?? '')
      if (peers.size < PEER_CACHE_MAX) peers.set(peer, known)
    }
    return known
  }
  const resolve = (peer: string, forwardedFor: string | undefined): string => {
    if (!forwardedFor || !isTrusted(peer)) return peer
    let end = forwardedFor.length
    while (end > 0) {
      const comma = forwardedFor.lastIndexOf(',', end - 1)
      const hop = forwardedFor.slice(comma + 1, end).trim()
      end = comma === -1 ? 0 : comma
      if (!hop) continue
      const c = canonicalIp(hop)
      if (c === null || !trusted.has(c)) return c ?? hop.slice(0, 64)
    }
    return peer
  }
  return Object.defineProperty(resolve, 'cachedPeers', { get: () => peers.size }) as ClientIpResolver
}
