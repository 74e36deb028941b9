// A hand-written SVG chart of latency percentiles, one group of bars per run, on a log scale
// (callbacks answer in tens of microseconds, database writes in milliseconds). No dependencies.
import type { LatencyRow } from './results.js'

const SERIES = [
  { key: 'p50', label: 'p50', color: '#4c78a8' },
  { key: 'p90', label: 'p90', color: '#72b7b2' },
  { key: 'p99', label: 'p99', color: '#f58518' },
  { key: 'p999', label: 'p99.9', color: '#e45756' },
] as const

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;')

export function formatMicros(us: number): string {
  if (!Number.isFinite(us)) return '–'
  if (us >= 1_000_000) return `${(us / 1_000_000).toFixed(us >= 10_000_000 ? 0 : 1)} s`
  if (us >= 1_000) return `${(us / 1_000).toFixed(us >= 10_000 ? 0 : 1)} ms`
  return `${Math.round(us)} µs`
}

export function latencyChart(rows: readonly LatencyRow[], title = 'Latency percentiles per run (log scale)'): string {
  // Sans-serif at 11 px is about 6.3 px a character.
  const labelW = Math.max(120, Math.ceil(Math.max(0, ...rows.map(r => r.label.length)) * 6.3) + 16)
  const plotW = 560
  const barH = 6
  const groupGap = 10
  const top = 48
  const groupH = SERIES.length * barH + groupGap
  const height = top + Math.max(1, rows.length) * groupH + 34
  const width = labelW + plotW + 90
  const values = rows.flatMap(r => SERIES.map(s => r[s.key])).filter(v => Number.isFinite(v) && v > 0)
  const lo = values.length ? Math.pow(10, Math.floor(Math.log10(Math.max(1, Math.min(...values))))) : 10
  const hi = Math.pow(10, Math.ceil(Math.log10(Math.max(...values, lo * 10))))
  const x = (v: number) => labelW + (Math.log10(Math.max(v, lo)) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo)) * plotW
  const out: string[] = []
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="11">`)
  out.push(`<rect width="${width}" height="${height}" fill="#ffffff"/>`)
  out.push(`<text x="${labelW}" y="16" font-size="13" font-weight="bold">${esc(title)}</text>`)
  SERIES.forEach((s, k) => {
    const lx = labelW + k * 80
    out.push(`<rect x="${lx}" y="26" width="10" height="10" fill="${s.color}"/><text x="${lx + 14}" y="35">${s.label}</text>`)
  })
  const bottom = top + rows.length * groupH
  for (let d = lo; d <= hi; d *= 10) {
    const gx = x(d).toFixed(1)
    out.push(`<line x1="${gx}" y1="${top - 4}" x2="${gx}" y2="${bottom}" stroke="#dddddd"/>`)
    out.push(`<text x="${gx}" y="${bottom + 14}" text-anchor="middle" fill="#555555">${esc(formatMicros(d))}</text>`)
  }
  rows.forEach((r, i) => {
    const gy = top + i * groupH
    out.push(`<text x="${labelW - 8}" y="${gy + (SERIES.length * barH) / 2 + 4}" text-anchor="end">${esc(r.label)}</text>`)
    SERIES.forEach((s, k) => {
      const v = r[s.key]
      if (!Number.isFinite(v)) return
      const y = gy + k * barH
      out.push(`<rect x="${labelW}" y="${y}" width="${Math.max(1, x(v) - labelW).toFixed(1)}" height="${barH - 1}" fill="${s.color}"><title>${esc(`${r.label} ${s.label}: ${formatMicros(v)}`)}</title></rect>`)
    })
    const p99 = r.p99
    if (Number.isFinite(p99)) out.push(`<text x="${(x(Math.max(r.p999, p99)) + 4).toFixed(1)}" y="${gy + 3 * barH}" fill="#555555">p99 ${esc(formatMicros(p99))}</text>`)
  })
  out.push(`<text x="${labelW + plotW / 2}" y="${height - 4}" text-anchor="middle" fill="#555555">response time</text>`)
  out.push('</svg>')
  return out.join('\n')
}
