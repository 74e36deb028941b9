// The region (ISO country) of an E.164 number, for proxy allocation (DECISIONS 2, 4): the country
// comes from libphonenumber-js. Its full parse costs ~4-13 µs, twice per create, so:
// - a calling code used by one country gives that country without parsing;
// - a shared calling code is parsed; NANP (+1) answers are remembered per area code, because the
//   numbering plan gives each area code to exactly one country or territory;
// - a number the library cannot place falls back to the calling code's main country (+44 7700 900…
//   drama numbers → GB), so region matching still works for fictional numbers.
import { parsePhoneNumberFromString } from 'libphonenumber-js/core'
import metadata from 'libphonenumber-js/min/metadata'

const nanpByAreaCode = new Map<string, string>()

export function regionOf(e164: string): string | null {
  for (let len = 1; len <= 3 && len < e164.length; len++) {
    const code = e164.substring(1, 1 + len)
    const countries: readonly string[] | undefined = metadata.country_calling_codes[code]
    if (countries === undefined) continue
    if (countries.length === 1) return countries[0]
    if (code === '1' && e164.length >= 5) {
      const area = e164.substring(0, 5)
      const known = nanpByAreaCode.get(area)
      if (known !== undefined) return known
      const country = parsePhoneNumberFromString(e164, metadata)?.country
      if (country !== undefined) nanpByAreaCode.set(area, country)
      return country ?? countries[0]
    }
    return parsePhoneNumberFromString(e164, metadata)?.country ?? countries[0]
  }
  return null
}
