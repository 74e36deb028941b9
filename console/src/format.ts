// Display helpers. The API never returns a party's real number (its response schemas are
// allow-lists), and the page adds a second guard: free text from the server (provider errors,
// delivery errors) goes through maskDigits before it is shown.
export function maskDigits(text: string): string {
  return text.replace(/\+?\d[\d\s().-]{5,}\d/g, '•••')
}

export function time(iso: string | null | undefined): string {
  if (!iso) return '—'
  const d = new Date(iso)
  return d.toISOString().replace('T', ' ').slice(0, 19) + 'Z'
}

export function duration(seconds: number): string {
  const m = Math.floor(seconds / 60)
  const s = seconds % 60
  return m > 0 ? `${m} min ${s} s` : `${s} s`
}

/** A party as the console names it: its role in the session, never its number. */
export function party(direction: string, end: 'from' | 'to'): string {
  const [from, to] = direction === 'A_TO_B' ? ['Agent (A)', 'Customer (B)'] : ['Customer (B)', 'Agent (A)']
  return end === 'from' ? from! : to!
}

export function percent(n: number, d: number): string {
  return d === 0 ? '—' : `${Math.round((n / d) * 100)} %`
}
