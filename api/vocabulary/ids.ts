// Shared vocabulary (test/layering.test.ts): a leaf every layer may import, sql/ included.
import { randomFillSync } from 'node:crypto'

// DECISIONS 2: every id is a UUIDv7 (RFC 9562), so ordering by id is chronological.
// A monotonic counter in rand_a keeps ids minted in the same millisecond in order.
const bytes = Buffer.alloc(16)
let lastMs = 0
let seq = 0
// Random bits come from a pool refilled 4 KiB at a time: one randomFillSync per id cost more
// than the rest of the id (a syscall-backed call per 16 bytes; visible in the callback profile).
const POOL = 4096
const pool = new Uint8Array(POOL)
let poolAt = POOL

export function uuidv7(nowMs: number = Date.now()): string {
  if (nowMs <= lastMs) {
    seq++
    if (seq > 0xfff) { lastMs++; seq = 0 }
    nowMs = lastMs
  } else {
    lastMs = nowMs
    seq = 0
  }
  if (poolAt + 10 > POOL) { randomFillSync(pool); poolAt = 0 }
  bytes.set(pool.subarray(poolAt, poolAt + 10), 6)
  poolAt += 10
  const hi = Math.floor(nowMs / 0x10000)
  bytes[0] = (hi >>> 24) & 0xff
  bytes[1] = (hi >>> 16) & 0xff
  bytes[2] = (hi >>> 8) & 0xff
  bytes[3] = hi & 0xff
  bytes[4] = (nowMs >>> 8) & 0xff
  bytes[5] = nowMs & 0xff
  bytes[6] = 0x70 | ((seq >>> 8) & 0x0f)
  bytes[7] = seq & 0xff
  bytes[8] = 0x80 | (bytes[8]! & 0x3f)
  const h = bytes.toString('hex')
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`
}

export const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
