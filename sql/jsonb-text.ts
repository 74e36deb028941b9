// The JSON text of a value as Postgres's jsonb would give it back, for what memory holds instead of
// reading it (a live session's metadata). jsonb keeps one value per key (the last, as
// JSON.parse does) and orders an object's keys by their length in bytes, then bytewise
// (lengthCompareJsonbStringValue in src/backend/utils/adt/jsonb_util.c): `{"bb":1,"a":2}` comes back
// as `{"a": 2, "bb": 1}`. Whitespace differs from Postgres's output, which no reader sees.

function byJsonbOrder(a: string, b: string): number {
  const la = Buffer.byteLength(a), lb = Buffer.byteLength(b)
  return la !== lb ? la - lb : Buffer.compare(Buffer.from(a), Buffer.from(b))
}

function ordered(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(ordered)
  if (v === null || typeof v !== 'object') return v
  const src = v as Record<string, unknown>
  const out: Record<string, unknown> = {}
  // defineProperty: a "__proto__" key (kept by the body parser) stays a key, not a prototype.
  for (const k of Object.keys(src).sort(byJsonbOrder)) Object.defineProperty(out, k, { value: ordered(src[k]), enumerable: true, writable: true, configurable: true })
  return out
}

export function jsonbText(value: unknown): string {
  return JSON.stringify(ordered(value))
}
