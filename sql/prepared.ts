// Named prepared statements for the few large statements on hot paths. slonik sends every query
// as an unnamed statement, so Postgres parses and plans it on each execution: for the one-statement
// session create (about ten CTEs) that was 0.75 ms of parse and 1.3 ms of planning per create,
// nearly all of Postgres's CPU per POST /v1/sessions in the bench (execution itself is cheap).
// A statement whose text starts with PREPARE is sent by pg as a named statement instead: parsed
// once per connection, and its plan cached by Postgres (custom plans first, then a generic plan
// when it costs no more).
//
// slonik offers no hook for statement names, so pg.Client#query is wrapped once, and only texts
// that start with the marker are touched. Names are per connection (a client id and a hash of the
// text): pg keeps the list of what each connection has parsed. Not on the embedded server, where
// every connection shares one PGlite backend that would keep each closed connection's statements.
import { createHash } from 'node:crypto'
import pg from 'pg'
import { sql } from 'slonik'

const MARK = '/* prepared */'
/** Put first in a statement's text to have it prepared once per connection (the text of MARK). */
export const PREPARE = sql.fragment`/* prepared */`
/** application_name of the embedded server's connections: they are left unnamed. */
export const UNPREPARED_APPLICATION = 'maskline-embedded'
/** Distinct marked texts remembered; past this a statement goes unnamed (a bug, not a workload). */
const MAX_TEXTS = 256

type QueryFn = (this: pg.Client, ...args: unknown[]) => unknown
let installed = false

export function installPreparedStatements(): void {
  if (installed) return
  installed = true
  const proto = pg.Client.prototype as unknown as { query: QueryFn }
  const query = proto.query
  const clientIds = new WeakMap<object, number>()
  const hashes = new Map<string, string>()
  let nextId = 0
  proto.query = function (this: pg.Client, ...args: unknown[]) {
    const [text, values] = args
    if (typeof text !== 'string' || !text.startsWith(MARK) || args.length > 2) return query.apply(this, args)
    const params = (this as unknown as { connectionParameters?: { application_name?: string } }).connectionParameters
    if (params?.application_name === UNPREPARED_APPLICATION) return query.apply(this, args)
    let hash = hashes.get(text)
    if (hash === undefined) {
      if (hashes.size >= MAX_TEXTS) return query.apply(this, args)
      hash = createHash('sha256').update(text).digest('hex').slice(0, 20)
      hashes.set(text, hash)
    }
    let id = clientIds.get(this)
    if (id === undefined) clientIds.set(this, (id = ++nextId))
    return query.call(this, { name: `ml${id}_${hash}`, text, values })
  }
}
