// Request parameters as Twilio's SDKs send them: a form body (POST) or a query string (GET),
// PascalCase names, arrays as repeated keys, booleans "true"/"false" (any case here), ISO 8601
// dates with or without an offset. Unknown parameters are ignored, as Twilio does.
import { formPairs, type FormPair } from '../cpaas/form.js'
import { invalidParam, TwilioError } from './errors.js'

const MAX_FIELDS = 64

export class Params {
  private readonly pairs: readonly FormPair[]

  constructor(pairs: readonly FormPair[]) {
    this.pairs = pairs
  }

  static parse(text: Buffer | string | null): Params {
    if (text === null || text.length === 0) return new Params([])
    const pairs = formPairs(text, MAX_FIELDS)
    if (pairs === null) throw new TwilioError(400, 20001, 'The request parameters could not be parsed')
    return new Params(pairs)
  }

  has(name: string): boolean {
    return this.pairs.some(p => p[0] === name)
  }

  all(name: string): string[] {
    return this.pairs.filter(p => p[0] === name).map(p => p[1])
  }

  /** The first value; undefined when absent. */
  str(name: string, max = 4000): string | undefined {
    const p = this.pairs.find(x => x[0] === name)
    if (p === undefined) return undefined
    if (p[1].length > max) throw invalidParam(name)
    return p[1]
  }

  required(name: string, max?: number): string {
    const v = this.str(name, max)
    if (v === undefined || v === '') throw invalidParam(name)
    return v
  }

  bool(name: string): boolean | undefined {
    const v = this.str(name)
    if (v === undefined) return undefined
    const l = v.toLowerCase()
    if (l === 'true') return true
    if (l === 'false') return false
    throw invalidParam(name)
  }

  int(name: string, min: number, max: number): number | undefined {
    const v = this.str(name)
    if (v === undefined) return undefined
    if (!/^-?\d{1,12}$/.test(v.trim())) throw invalidParam(name)
    const n = Number(v.trim())
    if (n < min || n > max) throw invalidParam(name)
    return n
  }

  oneOf<T extends string>(name: string, values: readonly T[]): T | undefined {
    const v = this.str(name)
    if (v === undefined) return undefined
    const l = v.toLowerCase()
    const hit = values.find(x => x === l)
    if (hit === undefined) throw invalidParam(name)
    return hit
  }

  /** An ISO 8601 date-time in epoch ms (no offset: UTC). */
  date(name: string): number | undefined {
    const v = this.str(name)
    if (v === undefined) return undefined
    const ms = parseIsoDate(v)
    if (ms === null) throw invalidParam(name)
    return ms
  }
}

const ISO_DATE = /^(\d{4})-(\d\d)-(\d\d)(?:[T ](\d\d):(\d\d)(?::(\d\d)(?:\.\d+)?)?)?\s*(Z|[+-]\d\d(?::?\d\d)?)?$/i

export function parseIsoDate(text: string): number | null {
  const m = ISO_DATE.exec(text.trim())
  if (!m) return null
  const frac = /\.(\d+)/.exec(text)?.[1] ?? ''
  let s = `${m[1]}-${m[2]}-${m[3]}T${m[4] ?? '00'}:${m[5] ?? '00'}:${m[6] ?? '00'}.${frac.slice(0, 3).padEnd(3, '0')}`
  const off = m[7]
  if (!off || off.toUpperCase() === 'Z') s += 'Z'
  else s += off.length === 3 ? `${off}:00` : off.includes(':') ? off : `${off.slice(0, 3)}:${off.slice(3)}`
  const ms = Date.parse(s)
  return Number.isFinite(ms) ? ms : null
}

/** ISO 8601 UTC with Z and no milliseconds, as Twilio writes dates. */
export function twilioDate(ms: number | null | undefined): string | null {
  if (ms === null || ms === undefined) return null
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z')
}
