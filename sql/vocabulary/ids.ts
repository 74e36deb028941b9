// Shared vocabulary (test/layering.test.ts): a leaf every layer may import, sql/ included.
import { randomFillSync } from 'node:crypto'

// contract D2: every id is a UUIDv7 (RFC 9562), so ordering by id is chronological.
// Ours, not the `uuid` package: its v7() cost 17-22 µs an id here against 0.7-0.9 µs for this one
// (1,000,000 ids each, Node 20, uuid 14.0.3), and a routed call mints two.
// A monotonic counter in rand_a keeps ids minted in the same millisecond in order.
// Random bits come from a pool refilled 4 KiB at a time: one randomFillSync per id cost more
// than the rest of the id (a syscall-backed call per 16 bytes; visible in the callback profile).
const POOL = 4096
const pool = new Uint8Array(POOL)
let poolAt = POOL
let lastMs = 0
let seq = 0
/**
 * The id's text is written byte by byte into one buffer and read out as a single string: hex of a
 * 16-byte buffer, five slices and a template allocated ~0.5 KB per id, and a routed call mints two
 * (its own and its event's; bench/RESULTS.md, "What moved the figures", eb7ca24).
 */
const text = Buffer.alloc(36, 0x2d) // '-' where the dashes go
const HEX = Buffer.from('0123456789abcdef', 'latin1')
/** Where byte i of the UUID goes in the text (two hex digits). */
const AT = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34]

function put(i: number, byte: number): void {
  const at = AT[i]!
  text[at] = HEX[byte >>> 4]!
  text[at + 1] = HEX[byte & 0x0f]!
}

export function uuidv7(nowMs: number = Date.now()): string {
  if (nowMs <= lastMs) {
    seq++
    if (seq > 0xfff) { lastMs++; seq = 0 }
    nowMs = lastMs
  } else {
    lastMs = nowMs
    seq = 0
  }
  if (poolAt + 8 > POOL) { randomFillSync(pool); poolAt = 0 }
  const hi = Math.floor(nowMs / 0x10000)
  put(0, (hi >>> 24) & 0xff)
  put(1, (hi >>> 16) & 0xff)
  put(2, (hi >>> 8) & 0xff)
  put(3, hi & 0xff)
  put(4, (nowMs >>> 8) & 0xff)
  put(5, nowMs & 0xff)
  put(6, 0x70 | ((seq >>> 8) & 0x0f))
  put(7, seq & 0xff)
  put(8, 0x80 | (pool[poolAt]! & 0x3f))
  for (let i = 9; i < 16; i++) put(i, pool[poolAt + i - 8]!)
  poolAt += 8
  return text.toString('latin1', 0, 36)
}

export const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
