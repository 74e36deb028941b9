// HMAC (RFC 2104) over node:crypto's one-shot hash(), for the hot paths: party hashes, callback
// signatures, API-secret checks, token signatures.
//
// Why not createHmac: every Hmac (and Hash) is a JavaScript object bound to a native one, and V8's
// scavenger keeps such objects alive until a full collection. Each request that made one left it,
// and what it holds, to be copied into the old generation: in the token-exchange bench (three of
// them per request) the heap grew by ~40 MB per scavenge and each scavenge paused the process for
// 15-30 ms (bench/RESULTS.md, "What moved the figures", 0a4fa8d). hash() allocates no such object; the
// key's inner and outer pads are computed once, and the message is written into a buffer kept
// for the next call, so a MAC costs two native hash calls and a result.
import { hash, type BinaryToTextEncoding } from 'node:crypto'

export type MacAlgorithm = 'sha1' | 'sha256'
type Encoding = BinaryToTextEncoding | 'buffer'

/** MAC of the concatenation of `parts` (strings as UTF-8), in `encoding` (a Buffer for 'buffer'). */
export interface Mac {
  (encoding: 'buffer', ...parts: Array<string | Uint8Array>): Buffer
  (encoding: BinaryToTextEncoding, ...parts: Array<string | Uint8Array>): string
}

const BLOCK = 64 // SHA-1 and SHA-256 alike
const DIGEST: Record<MacAlgorithm, number> = { sha1: 20, sha256: 32 }

export function createMac(algorithm: MacAlgorithm, key: Uint8Array): Mac {
  const k = key.length > BLOCK ? hash(algorithm, key, 'buffer') : key
  let inner = Buffer.alloc(BLOCK + 256)
  const outer = Buffer.alloc(BLOCK + DIGEST[algorithm])
  for (let i = 0; i < BLOCK; i++) {
    inner[i] = (k[i] ?? 0) ^ 0x36
    outer[i] = (k[i] ?? 0) ^ 0x5c
  }
  function mac(encoding: Encoding, ...parts: Array<string | Uint8Array>): Buffer | string {
    let at = BLOCK
    for (const p of parts) {
      // A UTF-8 string takes at most three bytes per UTF-16 unit.
      const room = typeof p === 'string' ? p.length * 3 : p.length
      if (at + room > inner.length) {
        const grown = Buffer.alloc(Math.max(at + room, inner.length * 2))
        inner.copy(grown, 0, 0, at)
        inner = grown
      }
      at += typeof p === 'string' ? inner.write(p, at, 'utf8') : (inner.set(p, at), p.length)
    }
    hash(algorithm, inner.subarray(0, at), 'buffer').copy(outer, BLOCK)
    return hash(algorithm, outer, encoding)
  }
  return mac as Mac
}

/** SHA-256 of a string (UTF-8) or bytes, without a Hash object. */
export function sha256(data: string | Uint8Array): Buffer {
  return hash('sha256', data, 'buffer')
}
