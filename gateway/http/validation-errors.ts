// Ajv errors → `errors: [{field, issue}]` (contract 7). Issues are stable snake_case codes; the
// rejected value is never echoed (it may be a phone number).
import type { ErrorObject } from 'ajv'
import type { FieldIssue } from '../../api/problems.js'

const ISSUES: Record<string, string> = {
  required: 'required',
  type: 'invalid_type',
  pattern: 'invalid_format',
  format: 'invalid_format',
  enum: 'invalid_value',
  const: 'invalid_value',
  anyOf: 'invalid_value',
  oneOf: 'invalid_value',
  minLength: 'too_short',
  maxLength: 'too_long',
  minimum: 'out_of_range',
  maximum: 'out_of_range',
  exclusiveMinimum: 'out_of_range',
  exclusiveMaximum: 'out_of_range',
  multipleOf: 'invalid_value',
  minItems: 'too_few_items',
  maxItems: 'too_many_items',
  uniqueItems: 'duplicate_items',
  minProperties: 'too_few_properties',
  maxProperties: 'too_many_properties',
  additionalProperties: 'unknown_field',
  unevaluatedProperties: 'unknown_field',
}

function fieldOf(e: ErrorObject, prefix: string): string {
  const parts = e.instancePath.split('/').slice(1).map(p => p.replace(/~1/g, '/').replace(/~0/g, '~'))
  if (e.keyword === 'required') parts.push(String((e.params as { missingProperty: string }).missingProperty))
  else if (e.keyword === 'additionalProperties') parts.push(String((e.params as { additionalProperty: string }).additionalProperty))
  const field = parts.join('.')
  return prefix && !field ? prefix : field
}

/**
 * A failed anyOf (a nullable field, a union) reports the branch the value was meant for: the
 * one branch that did not fail on type alone (`"555"` against `E164 | null` is a bad E.164,
 * not a bad null). When no single branch stands out, the union's own issue, invalid_value.
 */
function resolveUnions(errors: readonly ErrorObject[]): ErrorObject[] {
  const unions = errors.filter(e => e.keyword === 'anyOf' || e.keyword === 'oneOf')
  if (!unions.length) return [...errors]
  const dropped = new Set<ErrorObject>()
  for (const u of unions) {
    const prefix = u.schemaPath + '/'
    const branches = new Map<string, ErrorObject[]>()
    for (const e of errors) {
      if (!e.schemaPath.startsWith(prefix)) continue
      dropped.add(e)
      const i = e.schemaPath.slice(prefix.length).split('/')[0]!
      branches.set(i, [...(branches.get(i) ?? []), e])
    }
    const meant = [...branches.values()].filter(errs =>
      !errs.every(e => (e.keyword === 'type' || e.keyword === 'const') && e.instancePath === u.instancePath))
    if (meant.length === 1) {
      dropped.add(u)
      for (const e of meant[0]!) dropped.delete(e)
    }
  }
  return errors.filter(e => !dropped.has(e))
}

/** One issue per field and failure. */
export function toFieldIssues(errors: readonly ErrorObject[] | null | undefined, prefix = ''): FieldIssue[] {
  if (!errors?.length) return []
  const out: FieldIssue[] = []
  const seen = new Set<string>()
  for (const e of resolveUnions(errors)) {
    if (e.keyword === 'if' || e.keyword === 'allOf') continue
    const field = fieldOf(e, prefix)
    const issue = ISSUES[e.keyword] ?? 'invalid_value'
    const key = `${field}\u0000${issue}`
    if (seen.has(key)) continue
    seen.add(key)
    out.push({ field, issue })
  }
  return out
}
