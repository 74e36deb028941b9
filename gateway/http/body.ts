// Request body through `onData` with a byte cap (STYLE 6). uWS hands out chunks that are only
// valid during the callback, so each one is copied. Over the cap the caller answers 413 and
// closes the connection; whatever else arrives is ignored.
import type { HttpResponse } from 'uWebSockets.js'

export const DEFAULT_BODY_LIMIT = 16 * 1024

export class BodyTooLarge extends Error {
  constructor() {
    super('body over the limit')
    this.name = 'BodyTooLarge'
  }
}

export class BodyAborted extends Error {
  constructor() {
    super('client went away before the body was complete')
    this.name = 'BodyAborted'
  }
}

const EMPTY = Buffer.alloc(0)

/**
 * Must be called synchronously inside the uWS handler, before any await. `onAbort` receives the
 * function to call from the response's onAborted: the promise then rejects with BodyAborted.
 */
export function readBody(res: HttpResponse, limit: number, onAbort: (abort: () => void) => void): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    onAbort(() => reject(new BodyAborted()))
    let chunks: Buffer[] | null = null
    let first: Buffer | null = null
    let size = 0
    let over = false
    res.onData((ab, isLast) => {
      if (over) return
      size += ab.byteLength
      if (size > limit) {
        over = true
        reject(new BodyTooLarge())
        return
      }
      if (isLast && first === null && chunks === null) {
        // The common case: the whole body in one chunk.
        resolve(ab.byteLength ? Buffer.from(ab.slice(0)) : EMPTY)
        return
      }
      const copy = Buffer.from(ab.slice(0))
      if (first === null) first = copy
      else (chunks ??= [first]).push(copy)
      if (isLast) resolve(chunks ? Buffer.concat(chunks, size) : first)
    })
  })
}
