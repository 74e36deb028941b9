// Response serialization by allow-list (style 5): a picker compiled from the response schema
// copies only the properties the schema declares, recursively. A handler that returns a whole
// database row, real numbers included, still emits only the declared fields.
import type { TSchema } from '@sinclair/typebox'

export type Picker = (value: unknown) => unknown
/** Compiles a boolean check for a schema (used to tell union variants apart). */
export type CheckFactory = (schema: TSchema) => (value: unknown) => boolean

const keep: Picker = v => v

// A primitive slot never passes an object through: a record put where a string belongs is dropped.
const primitive: Picker = v => {
  if (v === null || typeof v !== 'object') return v
  if (v instanceof Date) return v.toISOString()
  return undefined
}

type Schema = Record<string, any>

function isPrimitiveSchema(s: Schema): boolean {
  if (s.anyOf || s.oneOf) return (s.anyOf ?? s.oneOf).every(isPrimitiveSchema)
  if (s.allOf) return false
  const t = s.type
  if (t === 'object' || t === 'array') return false
  if (Array.isArray(t)) return !t.includes('object') && !t.includes('array')
  if (t !== undefined) return true
  return s.enum !== undefined || s.const !== undefined
}

/** Properties of an object schema, flattening allOf (TypeBox Intersect). */
function objectParts(s: Schema): { properties: Record<string, Schema>; extra: 'none' | 'all' | Schema[] } | null {
  if (s.allOf) {
    const parts = (s.allOf as Schema[]).map(objectParts)
    if (parts.some(p => p === null)) return null
    const properties: Record<string, Schema> = {}
    let extra: 'none' | 'all' | Schema[] = 'none'
    for (const p of parts as NonNullable<ReturnType<typeof objectParts>>[]) {
      Object.assign(properties, p.properties)
      if (p.extra === 'all') extra = 'all'
    }
    return { properties, extra }
  }
  if (s.type !== 'object') return null
  const ap = s.additionalProperties
  let extra: 'none' | 'all' | Schema[] = 'none'
  if (s.patternProperties) extra = Object.entries(s.patternProperties as Record<string, Schema>).map(([re, sub]) => ({ re: new RegExp(re), sub }))
  else if (ap === true || (ap !== undefined && ap !== false && typeof ap === 'object' && Object.keys(ap).length === 0)) extra = 'all'
  else if (ap && typeof ap === 'object') extra = [{ re: /^/, sub: ap }]
  else if (ap === undefined && !s.properties) extra = 'all' // a bare `type: object` is free-form
  return { properties: (s.properties ?? {}) as Record<string, Schema>, extra }
}

export function compilePicker(schema: TSchema, check: CheckFactory): Picker {
  const s = schema as Schema
  if (s.anyOf || s.oneOf) {
    const variants = (s.anyOf ?? s.oneOf) as Schema[]
    if (variants.every(isPrimitiveSchema)) return primitive
    const compiled = variants.map(v => ({ ok: check(v as TSchema), pick: compilePicker(v as TSchema, check) }))
    // None matches (a handler bug): fall back to the union of every variant's fields, still an allow-list.
    const merged = compileObject({ properties: Object.assign({}, ...variants.map(v => objectParts(v)?.properties ?? {})), extra: 'none' }, check)
    return v => {
      for (const c of compiled) if (c.ok(v)) return c.pick(v)
      return merged(v)
    }
  }
  const obj = objectParts(s)
  if (obj) return compileObject(obj, check)
  if (s.type === 'array') {
    const item = s.items ? compilePicker(s.items as TSchema, check) : keep
    return v => (Array.isArray(v) ? v.map(item) : undefined)
  }
  if (isPrimitiveSchema(s)) return primitive
  return keep // unknown / any: free-form by declaration
}

function compileObject(obj: NonNullable<ReturnType<typeof objectParts>>, check: CheckFactory): Picker {
  const keys = Object.keys(obj.properties)
  const pickers = keys.map(k => compilePicker(obj.properties[k] as TSchema, check))
  const extra = obj.extra
  if (extra === 'all') return v => (v === null || typeof v !== 'object' || Array.isArray(v) ? undefined : v)
  if (extra === 'none' && !keys.includes('__proto__')) return straightLine(keys, pickers)
  const patterns = Array.isArray(extra) ? extra.map(e => ({ re: e.re as RegExp, pick: compilePicker(e.sub as TSchema, check) })) : null
  const known = new Set(keys)
  return v => {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) return undefined
    const src = v as Record<string, unknown>
    const out: Record<string, unknown> = {}
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i]!
      const val = src[k]
      if (val === undefined) continue
      const picked = pickers[i]!(val)
      if (picked !== undefined) out[k] = picked
    }
    if (patterns) {
      for (const k of Object.keys(src)) {
        if (known.has(k)) continue
        for (const p of patterns) {
          if (!p.re.test(k)) continue
          const picked = p.pick(src[k])
          if (picked === undefined) break
          // A `__proto__` key is data (JSON.parse makes it an own property); assigning it would
          // set the prototype instead and drop it from the answer.
          if (k === '__proto__') Object.defineProperty(out, k, { value: picked, enumerable: true, writable: true, configurable: true })
          else out[k] = picked
          break
        }
      }
    }
    return out
  }
}

/**
 * An object of declared properties only (the common case: every response body of the API) as
 * straight-line code, one statement per property with its name as a constant: the generic loop's
 * keyed loads and stores were megamorphic (a property name from an array per access) and the
 * pick was ~10 % of a session read's CPU in the bench. Primitive slots are inlined; the rest call
 * their picker. The names come from our own schemas and are embedded as JSON string literals.
 */
function straightLine(keys: readonly string[], pickers: readonly Picker[]): Picker {
  let body = 'if (v === null || typeof v !== "object" || Array.isArray(v)) return undefined\nconst out = {}\nlet x\n'
  keys.forEach((k, i) => {
    const name = JSON.stringify(k)
    body += `x = v[${name}]\n`
    if (pickers[i] === keep) body += `if (x !== undefined) out[${name}] = x\n`
    else if (pickers[i] === primitive) body += `if (x !== undefined && (x === null || typeof x !== "object" || (x instanceof Date && (x = x.toISOString(), true)))) out[${name}] = x\n`
    else body += `if (x !== undefined && (x = p[${i}](x)) !== undefined) out[${name}] = x\n`
  })
  body += 'return out'
  return new Function('p', `return function pick(v) {\n${body}\n}`)(pickers) as Picker
}
