// Reads behind the provider callbacks that the engine's memory does not answer.
import { sql } from 'slonik'
import type { Db } from './transaction.js'

export async function proxyOfSession(db: Db, sessionId: string): Promise<string | null> {
  return await db.maybeOneFirst(sql.unsafe`SELECT proxy_number FROM sessions WHERE id = ${sessionId}`) as string | null
}
