// Boot-time compilation of the route table (style 5): every validator and serializer is built
// once here, never per request. Separate Ajv instances: bodies are validated as sent (no
// coercion, no defaults); query strings and path parameters are strings on the wire, so they
// are coerced and take their defaults.
// The service's own schemas (TypeBox) are not checked against the JSON Schema meta-schema at every
// boot, nor are response checkers built there: with `checks` (every test's service) compileRoute
// does both and throws on a schema that is not valid JSON Schema. The two were ~60 % of compiling
// the route table, itself ~0.45 s of each boot (bench/RESULTS.md, "What moved the figures", a016144).
import { Ajv, type ValidateFunction } from 'ajv'
import formatsPlugin from 'ajv-formats'
import type { TSchema } from '@sinclair/typebox'
import type { RouteDef } from '../../api/route.js'
import { DEFAULT_BODY_LIMIT } from './body.js'
import { compilePicker, type Picker } from './serialize.js'

function makeAjv(coerce: boolean): Ajv {
  const ajv = new Ajv({
    allErrors: true,
    coerceTypes: coerce ? 'array' : false,
    useDefaults: coerce,
    strict: false,
    allowUnionTypes: true,
    messages: false,
    validateSchema: false,
  })
  formatsPlugin.default(ajv)
  return ajv
}

const ajvBody = makeAjv(false)
const ajvParams = makeAjv(true)
const ajvCheck = new Ajv({ allErrors: false, strict: false, allowUnionTypes: true, messages: false, validateSchema: false })
formatsPlugin.default(ajvCheck)

/** compileRoute's checks: the meta-schema validation Ajv's compile does by default (its meta-schema is compiled on first use). */
function assertValidSchema(schema: TSchema, where: string): void {
  if (!ajvCheck.validateSchema(schema)) throw new Error(`${where}: not a valid JSON Schema: ${ajvCheck.errorsText(ajvCheck.errors)}`)
}

export function checker(schema: TSchema): (v: unknown) => boolean {
  const fn = ajvCheck.compile(schema)
  return v => fn(v) as boolean
}

export interface CompiledRoute {
  def: RouteDef
  /** `:name` segments in order: uWS hands parameters out by index. */
  paramNames: string[]
  readsBody: boolean
  bodyLimit: number
  validateBody: ValidateFunction | null
  validateQuery: ValidateFunction | null
  validateParams: ValidateFunction | null
  /** Status → picker, or null for an empty body. A status not in the map is a handler bug. */
  serializers: Map<number, Picker | null>
  /** Checks a reply body against its schema: built only with compileRoute's `checks` (tests). */
  responseChecks: Map<number, ((v: unknown) => boolean) | null>
  rateLimited: boolean
  validationSlug: 'validation' | 'validation-error'
}

/** `checks`: also validate every schema of the route against the meta-schema and build its response checkers. */
export function compileRoute(def: RouteDef, checks = false): CompiledRoute {
  const key = `${def.method} ${def.path}`
  if (checks) {
    for (const [part, schema] of [['body', def.body], ['query', def.query], ['params', def.params]] as const) if (schema) assertValidSchema(schema, `${key} ${part}`)
  }
  const paramNames = def.path.split('/').filter(s => s.startsWith(':')).map(s => s.slice(1))
  const serializers = new Map<number, Picker | null>()
  const responseChecks = new Map<number, ((v: unknown) => boolean) | null>()
  for (const [status, schema] of Object.entries(def.response)) {
    if (checks && schema) assertValidSchema(schema, `${key} ${status}`)
    serializers.set(Number(status), schema ? compilePicker(schema, checker) : null)
    if (checks) responseChecks.set(Number(status), schema ? checker(schema) : null)
  }
  return {
    def,
    paramNames,
    readsBody: Boolean(def.body || def.rawBody),
    bodyLimit: def.bodyLimit ?? DEFAULT_BODY_LIMIT,
    validateBody: def.body && !def.rawBody ? ajvBody.compile(def.body) : null,
    validateQuery: def.query ? ajvParams.compile(def.query) : null,
    validateParams: def.params ? ajvParams.compile(def.params) : null,
    serializers,
    responseChecks,
    rateLimited: def.rateLimit ?? def.auth !== 'none',
    validationSlug: def.validationSlug ?? 'validation',
  }
}
