// application/x-www-form-urlencoded, as the telephony provider posts it (contract D5).
//
// - `+` is a space, `%XX` is percent-decoding of UTF-8. Malformed input (a bad escape, an escape
//   that is not valid UTF-8, too many fields) gives `null`, never a throw: the caller answers 400.
// - So does text that must not reach a statement (contract D13): a body that is not UTF-8, or a NUL,
//   raw or `%00`. Postgres refuses NUL in text; a provider never sends one.
// - Duplicate names: the FIRST value wins in the object form. Provider callbacks never repeat a
//   name, so a repeat is either noise or an attempt to shadow a field; taking the first keeps the
//   value the provider put first. The signature check does not use the object: it signs every
//   pair (formPairs + canonicalFormString), so duplicates cannot slip past it.
// - The object has no prototype, so `__proto__` or `constructor` are plain keys.

import { isUtf8 } from '../text-guard.js'

export type FormFields = Record<string, string>
export type FormPair = readonly [name: string, value: string]

/** More fields than any provider callback sends (a Telnyx voice fetch carries ~20). */
export const MAX_FORM_FIELDS = 256

function decodeComponent(s: string): string | null {
  const plus = s.indexOf('+')
  const pct = s.indexOf('%')
  if (plus === -1 && pct === -1) return s
  if (plus !== -1) s = s.replaceAll('+', ' ')
  if (pct === -1) return s
  try {
    const decoded = decodeURIComponent(s)
    return decoded.indexOf('\0') === -1 ? decoded : null
  } catch {
    return null
  }
}

function bodyText(body: Buffer | string): string | null {
  const text = typeof body === 'string' ? body : isUtf8(body) ? body.toString('utf8') : null
  return text === null || text.indexOf('\0') !== -1 ? null : text
}

/** Every name/value pair in order; `null` when malformed. Empty segments (`a=1&&b=2`) and pairs
 * with an empty name are skipped; a name without `=` has the value `''`. */
export function formPairs(body: Buffer | string, maxFields = MAX_FORM_FIELDS): FormPair[] | null {
  const text = bodyText(body)
  if (text === null) return null
  const pairs: FormPair[] = []
  const len = text.length
  let start = 0
  while (start <= len) {
    let end = text.indexOf('&', start)
    if (end === -1) end = len
    if (end > start) {
      const eq = text.indexOf('=', start)
      const hasEq = eq !== -1 && eq < end
      const name = decodeComponent(text.slice(start, hasEq ? eq : end))
      const value = hasEq ? decodeComponent(text.slice(eq + 1, end)) : ''
      if (name === null || value === null) return null
      if (name !== '') {
        if (pairs.length >= maxFields) return null
        pairs.push([name, value])
      }
    }
    start = end + 1
  }
  return pairs
}

/** Object form, first value wins; `null` when malformed. */
export function parseForm(body: Buffer | string, maxFields = MAX_FORM_FIELDS): FormFields | null {
  const pairs = formPairs(body, maxFields)
  return pairs === null ? null : formFromPairs(pairs)
}

/** The object form of pairs formPairs gave (the HTTP pipeline parses a signed callback's body once,
 * for the signature and the handler). */
export function formFromPairs(pairs: readonly FormPair[]): FormFields {
  const out: FormFields = Object.create(null) as FormFields
  for (const [name, value] of pairs) if (!Object.hasOwn(out, name)) out[name] = value
  return out
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0
}

/**
 * Twilio-style signing input for the form part: pairs sorted by name (UTF-16 code-unit order, as
 * Twilio's helper libraries' `sort()`), equal names by value, each appended as name + value with
 * no separator.
 */
export function canonicalFormString(form: readonly FormPair[] | Readonly<FormFields>): string {
  const pairs: FormPair[] = Array.isArray(form)
    ? [...(form as readonly FormPair[])]
    : Object.keys(form).map(k => [k, (form as FormFields)[k]!] as const)
  pairs.sort((x, y) => compare(x[0], y[0]) || compare(x[1], y[1]))
  let out = ''
  for (const [name, value] of pairs) out += name + value
  return out
}

/** Encodes fields as a form body (the inverse of parseForm, for drivers and fakes). */
export function encodeForm(fields: Readonly<Record<string, string | number | undefined>> | readonly FormPair[]): string {
  const entries: [string, string | number | undefined][] = Array.isArray(fields)
    ? (fields as readonly FormPair[]).map(([k, v]) => [k, v])
    : Object.entries(fields as Record<string, string | number | undefined>)
  let out = ''
  for (const [k, v] of entries) {
    if (v === undefined) continue
    if (out !== '') out += '&'
    out += encodeURIComponent(k).replaceAll('%20', '+') + '=' + encodeURIComponent(String(v)).replaceAll('%20', '+')
  }
  return out
}
