// A live per-minute chart on uPlot: x is the minute (epoch seconds), one series per figure.
import { html } from 'htm/preact'
import { useEffect, useRef } from 'preact/hooks'
import uPlot from 'uplot'

export interface Series { label: string; stroke: string }

export function MinuteChart(props: { id: string; series: Series[]; data: [number[], ...number[][]] }) {
  const box = useRef<HTMLDivElement>(null)
  const plot = useRef<uPlot | null>(null)

  useEffect(() => {
    const el = box.current!
    const opts: uPlot.Options = {
      width: Math.max(300, el.clientWidth),
      height: 220,
      scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(4, Math.ceil(max * 1.2))] } },
      axes: [{}, { size: 40, incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000] }],
      series: [{}, ...props.series.map(s => ({ label: s.label, stroke: s.stroke, width: 2, points: { show: true, size: 4 } }))],
      legend: { live: false },
      tzDate: ts => uPlot.tzDate(new Date(ts * 1e3), 'Etc/UTC'), // the axis says UTC, as the rest of the page
    }
    plot.current = new uPlot(opts, props.data, el)
    const ro = new ResizeObserver(() => plot.current?.setSize({ width: Math.max(300, el.clientWidth), height: 220 }))
    ro.observe(el)
    return () => { ro.disconnect(); plot.current?.destroy(); plot.current = null }
  }, [])

  useEffect(() => { plot.current?.setData(props.data) }, [props.data])

  const totals = props.series.map((_, i) => (props.data[i + 1] ?? []).reduce((a, b) => a + b, 0))
  return html`<div class="chart" id=${props.id} ref=${box}
    ...${Object.fromEntries(props.series.map((s, i) => [`data-total-${s.label.toLowerCase()}`, String(totals[i])]))}></div>`
}
