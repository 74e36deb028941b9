// Request body through `onData` with a byte cap (style 6). uWS hands out chunks that are only
// valid during the callback, so each one is copied. Over the cap the rest is read and dropped,
// up to DRAIN_LIMIT, before the caller answers 413: closing a socket with unread data
// makes the kernel reset it, and the client then loses the answer (EPIPE, ECONNRESET). Past
// DRAIN_LIMIT the caller closes anyway: the work stays bounded.
import type { HttpResponse } from 'uWebSockets.js'
import { MasklineError } from '../../engine/errors.js'

export const DEFAULT_BODY_LIMIT = 16 * 1024

/** Bytes of an over-large body read and dropped so that the 413 reaches the client. */
export const DRAIN_LIMIT = 16 * 1024 * 1024

export class BodyTooLarge extends MasklineError {
  /** The whole body was read (dropped): the connection can carry the 413 and stay open. */
  readonly drained: boolean
  constructor(drained: boolean) {
    super('ML_ERR_BODY_TOO_LARGE', 'body over the limit')
    this.drained = drained
  }
}

export class BodyAborted extends MasklineError {
  constructor() {
    super('ML_ERR_BODY_ABORTED', 'client went away before the body was complete')
  }
}

const EMPTY = Buffer.alloc(0)

/**
 * Must be called synchronously inside the uWS handler, before any await. `onAbort` receives the
 * function to call from the response's onAborted: `done` then gets BodyAborted. `done` is called
 * once, from the onData that completes the body (no promise turn between the last chunk and the
 * handler: every provider callback and REST write comes through here).
 */
export function readBody(res: HttpResponse, limit: number, onAbort: (abort: () => void) => void, done: (err: BodyAborted | BodyTooLarge | null, body: Buffer) => void): void {
  let settled = false
  const resolve = (body: Buffer) => { if (!settled) { settled = true; done(null, body) } }
  const reject = (err: BodyAborted | BodyTooLarge) => { if (!settled) { settled = true; done(err, EMPTY) } }
  onAbort(() => reject(new BodyAborted()))
  let chunks: Buffer[] | null = null
  let first: Buffer | null = null
  let size = 0
  let over = false
  res.onData((ab, isLast) => {
    size += ab.byteLength
    if (over || size > limit) {
      if (!over) { over = true; first = null; chunks = null }
      if (isLast || size > DRAIN_LIMIT) reject(new BodyTooLarge(isLast))
      return
    }
    if (isLast && first === null && chunks === null) {
      // The common case: the whole body in one chunk.
      resolve(ab.byteLength ? copyOf(ab) : EMPTY)
      return
    }
    const copy = copyOf(ab)
    if (first === null) first = copy
    else (chunks ??= [first]).push(copy)
    if (isLast) resolve(chunks ? Buffer.concat(chunks, size) : first)
  })
}

/**
 * A chunk copied out of uWS. Into Node's Buffer pool when it is small (every callback and REST
 * body): `Buffer.from(ab.slice(0))` made a new ArrayBuffer per request, and those cost the
 * service as much again in the collector (bench/RESULTS.md, "What moved the figures", 365b23b).
 */
function copyOf(ab: ArrayBuffer): Buffer {
  const b = Buffer.allocUnsafe(ab.byteLength)
  b.set(new Uint8Array(ab))
  return b
}

/**
 * Nesting bound of JSON bodies, checked on the raw bytes before JSON.parse (contract D13): an
 * 8,000-level array (16 KiB) passed the parser but not what came after it (validation, jsonb).
 * No body of the API nests deeper than a few levels; free-form objects (pushConfig) get 32.
 */
export const MAX_JSON_DEPTH = 32

const OPEN_ARRAY = 0x5b, OPEN_OBJECT = 0x7b, CLOSE_ARRAY = 0x5d, CLOSE_OBJECT = 0x7d, QUOTE = 0x22, BACKSLASH = 0x5c

/**
 * True when brackets outside strings nest deeper than `max`. Bodies with at most `max` opening
 * brackets in all (nearly every body) are settled by two native indexOf walks; only the rest are
 * scanned byte by byte.
 */
export function jsonNestsDeeper(raw: Buffer, max = MAX_JSON_DEPTH): boolean {
  if (raw.length <= max) return false
  let opening = 0
  for (const b of [OPEN_ARRAY, OPEN_OBJECT]) {
    for (let i = raw.indexOf(b); i !== -1 && opening <= max; i = raw.indexOf(b, i + 1)) opening++
  }
  if (opening <= max) return false
  let depth = 0
  const n = raw.length
  for (let i = 0; i < n; i++) {
    const c = raw[i]!
    if (c === QUOTE) {
      // Skip the string: to the next quote not escaped by a backslash.
      for (i++; i < n; i++) {
        const d = raw[i]!
        if (d === BACKSLASH) i++
        else if (d === QUOTE) break
      }
    } else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      if (++depth > max) return true
    } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) {
      depth--
    }
  }
  return false
}
