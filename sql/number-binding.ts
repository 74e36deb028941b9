// Numbers bound to a tenant (docs/dual-proxy.md): a bound number is used by that tenant's pinned
// creates only, never by native allocation. The store decides; each node's engine follows
// (Engine.bindNumber) at boot (sql/number-pool.ts loadNumbers) and when told.
import { sql } from 'slonik'
import { guard } from './errors.js'
import { rollback, transact, type Db } from './transaction.js'

/**
 * 'ok' (also when already bound to this tenant); 'unknown-number'; 'bound-elsewhere': bound to
 * another tenant; 'held-elsewhere': another tenant's live sessions are on it.
 */
export type BindResult = 'ok' | 'unknown-number' | 'bound-elsewhere' | 'held-elsewhere'

/** 'busy': live sessions are still on the number (end them first). */
export type UnbindResult = 'ok' | 'unknown-number' | 'bound-elsewhere' | 'busy'

interface NumberRow { bound_tenant_id: string | null; tenant_id: string | null; live_sessions: number }

/** The number's row, locked: a native create's hold (its UPDATE of the row) waits, or is waited for. */
async function lockNumber(tx: Parameters<Parameters<typeof transact>[1]>[0], number: string): Promise<NumberRow | null> {
  return (await tx.maybeOne(sql.unsafe`
    SELECT bound_tenant_id, tenant_id, live_sessions FROM proxy_numbers WHERE number = ${number} FOR NO KEY UPDATE`)) as NumberRow | null
}

export async function bindNumber(db: Db, a: { number: string; tenantId: string }): Promise<BindResult> {
  return guard(() => transact<BindResult>(db, async tx => {
    const row = await lockNumber(tx, a.number)
    if (row === null) return rollback('unknown-number')
    if (row.bound_tenant_id === a.tenantId) return 'ok'
    if (row.bound_tenant_id !== null) return rollback('bound-elsewhere')
    if (row.live_sessions > 0 && row.tenant_id !== a.tenantId) return rollback('held-elsewhere')
    await tx.query(sql.unsafe`UPDATE proxy_numbers SET bound_tenant_id = ${a.tenantId} WHERE number = ${a.number}`)
    return 'ok'
  }))
}

export async function unbindNumber(db: Db, a: { number: string; tenantId: string }): Promise<UnbindResult> {
  return guard(() => transact<UnbindResult>(db, async tx => {
    const row = await lockNumber(tx, a.number)
    if (row === null) return rollback('unknown-number')
    if (row.bound_tenant_id === null) return 'ok'
    if (row.bound_tenant_id !== a.tenantId) return rollback('bound-elsewhere')
    if (row.live_sessions > 0) return rollback('busy')
    await tx.query(sql.unsafe`UPDATE proxy_numbers SET bound_tenant_id = NULL WHERE number = ${a.number}`)
    return 'ok'
  }))
}
