// Text that can reach a statement is valid UTF-8 without NUL (contract D13). Postgres refuses NUL in
// text and jsonb ("invalid byte sequence for encoding UTF8: 0x00"), which surfaced as 500s, and
// invalid UTF-8 would be stored as U+FFFD: changed without a word. Both are refused at the edge
// instead: 400 on the REST API (gateway/http/app.ts), the callback's refusal answer on provider
// callbacks (api/cpaas/form.ts, api/cpaas/sms-payload.ts).
import { isUtf8 } from 'node:buffer'

export { isUtf8 }

export const UNCLEAN_TEXT_DETAIL = 'Text must be valid UTF-8 without NUL characters'

/** ES2024's String.prototype.isWellFormed (Node 20 has it; the ES2023 lib typings do not). */
type WellFormed = string & { isWellFormed(): boolean }

/** No NUL and no lone surrogate (a JSON `\ud800` escape cannot be encoded as UTF-8). */
function isCleanText(s: string): boolean {
  return s.indexOf('\0') === -1 && (s as WellFormed).isWellFormed()
}

/**
 * Where in a parsed JSON value a string (or a key) is not clean: its dotted path (`metadata.k`;
 * for a bad key, the path of its object; `''` for the root), or null when all are clean.
 * Iterative: a callback body (64 KiB, its depth not bounded) cannot overflow the stack.
 */
export function uncleanTextAt(value: unknown): string | null {
  const stack: [unknown, string][] = [[value, '']]
  while (stack.length) {
    const [v, path] = stack.pop()!
    if (typeof v === 'string') {
      if (!isCleanText(v)) return path
    } else if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) stack.push([v[i], path ? `${path}.${i}` : String(i)])
    } else if (v !== null && typeof v === 'object') {
      for (const k of Object.keys(v)) {
        if (!isCleanText(k)) return path
        stack.push([(v as Record<string, unknown>)[k], path ? `${path}.${k}` : k])
      }
    }
  }
  return null
}

export function hasUncleanText(value: unknown): boolean {
  return uncleanTextAt(value) !== null
}

const BACKSLASH_U = Buffer.from('\\u')

/**
 * A `\u` escape is the only way valid UTF-8 JSON can put a NUL or a lone surrogate into a string
 * (JSON.parse refuses raw control bytes), and JSON.stringify escapes only control characters: a
 * body without one needs no walk.
 */
export function hasUnicodeEscape(raw: Buffer): boolean {
  return raw.indexOf(BACKSLASH_U) !== -1
}
