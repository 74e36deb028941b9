// The region (ISO country) of an E.164 number, for proxy allocation (contract D2, D4): the country
// comes from libphonenumber-js (parseRegion, the reference). Its full parse costs ~4-13 µs, twice
// per create, so regionOf answers the same without parsing most of the time:
// - a calling code used by one country gives that country without parsing;
// - for a shared calling code (+1, +44, +7…), the answer is cached by the number minus its last
//   four digits (which also fixes its length), when the metadata of every country of that code
//   proves those digits cannot change it (prefixOnly below); otherwise every number is parsed;
// - a number the library cannot place falls back to the calling code's main country (+44 7700 900…
//   drama numbers → GB), so region matching still works for fictional numbers.
// test/engine/region-cache.test.ts compares regionOf with parseRegion over many numbers.
import { Metadata, parsePhoneNumberFromString, type CountryCode } from 'libphonenumber-js/core'
import metadata from 'libphonenumber-js/min/metadata'

/** Digits at the end of a number that the cache key leaves out. */
const TAIL = 4
/** Cached prefixes kept before the cache starts over (a bound, not a working-set size). */
const MAX_CACHED = 200_000
const TYPES = ['FIXED_LINE', 'MOBILE', 'TOLL_FREE', 'PREMIUM_RATE', 'PERSONAL_NUMBER', 'VOICEMAIL', 'UAN', 'PAGER', 'VOIP', 'SHARED_COST'] as const
const DIGITS = /^\+\d+$/

const byPrefix = new Map<string, string>()
/** Per shared calling code: how many leading national digits a prefix rule can read, or -1 (no cache). */
const prefixReach = new Map<string, number>()

/** The calling code of an E.164 number and its countries (main country first). */
function callingCode(e164: string): { code: string; countries: readonly string[] } | null {
  for (let len = 1; len <= 3 && len < e164.length; len++) {
    const code = e164.substring(1, 1 + len)
    const countries: readonly string[] | undefined = metadata.country_calling_codes[code]
    if (countries !== undefined) return { code, countries }
  }
  return null
}

/** What libphonenumber-js says, with the main-country fallback: the answer regionOf must give. */
export function parseRegion(e164: string): string | null {
  const cc = callingCode(e164)
  if (cc === null) return null
  if (cc.countries.length === 1) return cc.countries[0]!
  return parsePhoneNumberFromString(e164, metadata)?.country ?? cc.countries[0]!
}

export function regionOf(e164: string): string | null {
  const cc = callingCode(e164)
  if (cc === null) return null
  const { code, countries } = cc
  if (countries.length === 1) return countries[0]!
  let reach = prefixReach.get(code)
  if (reach === undefined) prefixReach.set(code, (reach = prefixOnly(countries)))
  const national = e164.length - 1 - code.length
  if (reach < 0 || national - TAIL < Math.max(reach, 1) || !DIGITS.test(e164)) return parseRegion(e164)
  const key = e164.substring(0, e164.length - TAIL)
  const known = byPrefix.get(key)
  if (known !== undefined) return known
  const region = parseRegion(e164)!
  if (byPrefix.size >= MAX_CACHED) byPrefix.clear()
  byPrefix.set(key, region)
  return region
}

/**
 * Whether the parser's country for a number of this calling code depends only on its length and
 * on all but its last TAIL digits, and if so how many leading national digits the prefix rules
 * read (the cache is used only for numbers with that many digits before the tail); -1 if not.
 * The parser decides with: the main country's national prefix for parsing (a rule matched at the
 * start), each country's leading digits (matched at the start), and each country's national and
 * per-type patterns (matched entirely) with possible lengths. A start rule without quantifiers
 * reads a bounded prefix; an entire-match pattern whose every top-level alternative ends in
 * `\d{m}` or `\d{m,n}` with m ≥ TAIL never reads the last TAIL digits beyond their count.
 */
function prefixOnly(countries: readonly string[]): number {
  const m = new Metadata(metadata)
  // The methods the parser itself calls; its published typings name fewer of them.
  const select = (country: string) => {
    m.selectNumberingPlan(country as CountryCode)
    return m.numberingPlan as unknown as PlanRules
  }
  let reach = 0
  const start = (re: string | undefined | null): boolean => {
    if (!re) return true
    const n = startRuleLength(re)
    if (n < 0) return false
    reach = Math.max(reach, n)
    return true
  }
  const main = select(countries[0]!)
  if (main.nationalPrefixTransformRule() || !start(main.nationalPrefixForParsing())) return -1
  for (const country of countries) {
    const plan = select(country)
    if (!start(plan.leadingDigits()) || !tailFree(plan.nationalNumberPattern())) return -1
    for (const t of TYPES) {
      const pattern = plan.type(t)?.pattern()
      if (pattern && !tailFree(pattern)) return -1
    }
  }
  return reach
}

interface PlanRules {
  nationalPrefixTransformRule(): string | undefined | null
  nationalPrefixForParsing(): string | undefined | null
  leadingDigits(): string | undefined | null
  nationalNumberPattern(): string
  type(t: string): { pattern(): string | undefined } | undefined
}

/** The top-level alternatives of a regular expression's source. */
function alternatives(re: string): string[] {
  const out: string[] = []
  let depth = 0
  let from = 0
  for (let i = 0; i < re.length; i++) {
    const c = re[i]
    if (c === '\\') i++
    else if (c === '[') { while (i < re.length && re[i] !== ']') i++ }
    else if (c === '(') depth++
    else if (c === ')') depth--
    else if (c === '|' && depth === 0) { out.push(re.slice(from, i)); from = i + 1 }
  }
  out.push(re.slice(from))
  return out
}

const FREE_END = /\\d\{(\d+)(?:,\d*)?\}$/

function tailFree(re: string): boolean {
  return alternatives(re).every(alt => {
    const m = FREE_END.exec(alt)
    return m !== null && Number(m[1]) >= TAIL
  })
}

/** The longest match of a quantifier-free rule (digits, classes, groups, alternation); -1 otherwise. */
function startRuleLength(re: string): number {
  let best = 0
  for (const alt of alternatives(re)) {
    let n = 0
    for (let i = 0; i < alt.length; i++) {
      const c = alt[i]!
      if (c === '(') {
        let depth = 1
        let j = i + 1
        for (; j < alt.length && depth > 0; j++) {
          if (alt[j] === '\\') j++
          else if (alt[j] === '(') depth++
          else if (alt[j] === ')') depth--
        }
        const inner = alt.slice(i + 1, j - 1).replace(/^\?:/, '')
        const len = startRuleLength(inner)
        if (len < 0) return -1
        n += len
        i = j - 1
      } else if (c === '[') {
        while (i < alt.length && alt[i] !== ']') i++
        n++
      } else if (c === '\\') {
        if (alt[i + 1] !== 'd') return -1
        i++
        n++
      } else if (c >= '0' && c <= '9') {
        n++
      } else {
        return -1 // a quantifier, an anchor or anything else: not a bounded prefix
      }
      if (alt[i + 1] !== undefined && '*+?{'.includes(alt[i + 1]!)) return -1
    }
    best = Math.max(best, n)
  }
  return best
}
