// The Twilio Proxy façade's store, part one: the tenant's Twilio-shaped account, its Services and
// their number pools (migration 018). Dates come back as epoch ms (sql/pg-types.ts).
import { sql } from 'slonik'
import { guard, StoreError } from './errors.js'
import { keysetPage, type Page, type PageRequest } from './twilio-proxy-page.js'
import { ts, type Db } from './transaction.js'

// ---------------------------------------------------------------------------------------------
// Accounts

export interface TwilioAccountRow { sid: string; tenantId: string; tokenMac: Buffer; tokenEnc: Buffer }

export async function accountBySid(db: Db, sid: string): Promise<TwilioAccountRow | null> {
  return guard(async () => {
    const r = await db.maybeOne(sql.unsafe`SELECT sid, tenant_id, token_mac, token_enc FROM twilio_accounts WHERE sid = ${sid}`)
    return r ? { sid: r.sid, tenantId: r.tenant_id, tokenMac: r.token_mac, tokenEnc: r.token_enc } : null
  })
}

export async function accountOfTenant(db: Db, tenantId: string): Promise<TwilioAccountRow | null> {
  return guard(async () => {
    const r = await db.maybeOne(sql.unsafe`SELECT sid, tenant_id, token_mac, token_enc FROM twilio_accounts WHERE tenant_id = ${tenantId}`)
    return r ? { sid: r.sid, tenantId: r.tenant_id, tokenMac: r.token_mac, tokenEnc: r.token_enc } : null
  })
}

/** Issues the tenant's account, or gives it a new token (the SID stays). Returns the SID in force. */
export async function upsertAccount(db: Db, a: TwilioAccountRow, now: number): Promise<string> {
  return guard(() => db.oneFirst(sql.unsafe`
    INSERT INTO twilio_accounts (sid, tenant_id, token_mac, token_enc, created_at, rotated_at)
    VALUES (${a.sid}, ${a.tenantId}, ${sql.binary(a.tokenMac)}, ${sql.binary(a.tokenEnc)}, ${ts(now)}, ${ts(now)})
    ON CONFLICT (tenant_id) DO UPDATE SET token_mac = EXCLUDED.token_mac, token_enc = EXCLUDED.token_enc, rotated_at = EXCLUDED.rotated_at
    RETURNING sid`) as Promise<string>)
}

/** A live API key (not revoked): its tenant and the MAC of its secret. */
export async function apiKeyBySid(db: Db, sid: string): Promise<{ tenantId: string; secretMac: Buffer } | null> {
  return guard(async () => {
    const r = await db.maybeOne(sql.unsafe`SELECT tenant_id, secret_mac FROM twilio_api_keys WHERE sid = ${sid} AND revoked_at IS NULL`)
    return r ? { tenantId: r.tenant_id, secretMac: r.secret_mac } : null
  })
}

export async function insertApiKey(db: Db, k: { sid: string; tenantId: string; secretMac: Buffer }, now: number): Promise<void> {
  await guard(() => db.query(sql.unsafe`
    INSERT INTO twilio_api_keys (sid, tenant_id, secret_mac, created_at) VALUES (${k.sid}, ${k.tenantId}, ${sql.binary(k.secretMac)}, ${ts(now)})`))
}

export async function revokeApiKey(db: Db, tenantId: string, sid: string, now: number): Promise<boolean> {
  return guard(async () => (await db.query(sql.unsafe`
    UPDATE twilio_api_keys SET revoked_at = ${ts(now)} WHERE tenant_id = ${tenantId} AND sid = ${sid} AND revoked_at IS NULL`)).rowCount > 0)
}

// ---------------------------------------------------------------------------------------------
// Services

export interface ServiceRow {
  id: string; tenant_id: string; unique_name: string; default_ttl: number; callback_url: string | null
  geo_match_level: string; number_selection_behavior: string; intercept_callback_url: string | null
  out_of_session_callback_url: string | null; chat_instance_sid: string | null; created_at: number; updated_at: number
}

export type ServiceFields = Omit<ServiceRow, 'id' | 'tenant_id' | 'created_at' | 'updated_at'>

const SERVICE_COLUMNS = sql.fragment`id, tenant_id, unique_name, default_ttl, callback_url, geo_match_level, number_selection_behavior,
  intercept_callback_url, out_of_session_callback_url, chat_instance_sid, created_at, updated_at`

/** 'conflict': the UniqueName is taken in this account. */
export async function insertService(db: Db, tenantId: string, id: string, f: ServiceFields, now: number): Promise<ServiceRow | 'conflict'> {
  try {
    return await guard(async () => await db.one(sql.unsafe`
      INSERT INTO twilio_services (id, tenant_id, unique_name, default_ttl, callback_url, geo_match_level, number_selection_behavior,
        intercept_callback_url, out_of_session_callback_url, chat_instance_sid, created_at, updated_at)
      VALUES (${id}, ${tenantId}, ${f.unique_name}, ${f.default_ttl}, ${f.callback_url}, ${f.geo_match_level}, ${f.number_selection_behavior},
        ${f.intercept_callback_url}, ${f.out_of_session_callback_url}, ${f.chat_instance_sid}, ${ts(now)}, ${ts(now)})
      RETURNING ${SERVICE_COLUMNS}`) as ServiceRow)
  } catch (err) {
    if (err instanceof StoreError && err.slug === 'conflict') return 'conflict'
    throw err
  }
}

/** By id or by UniqueName. */
export async function getService(db: Db, tenantId: string, by: { id: string } | { uniqueName: string }): Promise<ServiceRow | null> {
  const where = 'id' in by ? sql.fragment`id = ${by.id}` : sql.fragment`unique_name = ${by.uniqueName}`
  return guard(async () => await db.maybeOne(sql.unsafe`SELECT ${SERVICE_COLUMNS} FROM twilio_services WHERE tenant_id = ${tenantId} AND ${where}`) as ServiceRow | null)
}

export async function updateService(db: Db, tenantId: string, id: string, f: Partial<ServiceFields>, now: number): Promise<ServiceRow | null | 'conflict'> {
  const sets = Object.entries(f).filter(([, v]) => v !== undefined).map(([k, v]) => sql.fragment`${sql.identifier([k])} = ${v as string | number | null}`)
  sets.push(sql.fragment`updated_at = ${ts(now)}`)
  try {
    return await guard(async () => await db.maybeOne(sql.unsafe`
      UPDATE twilio_services SET ${sql.join(sets, sql.fragment`, `)} WHERE tenant_id = ${tenantId} AND id = ${id} RETURNING ${SERVICE_COLUMNS}`) as ServiceRow | null)
  } catch (err) {
    if (err instanceof StoreError && err.slug === 'conflict') return 'conflict'
    throw err
  }
}

/** Removes the Service with its pool, sessions, participants and interactions. */
export async function deleteService(db: Db, tenantId: string, id: string): Promise<boolean> {
  return guard(async () => (await db.query(sql.unsafe`DELETE FROM twilio_services WHERE tenant_id = ${tenantId} AND id = ${id}`)).rowCount > 0)
}

export async function listServices(db: Db, tenantId: string, req: PageRequest): Promise<Page<ServiceRow & { key: string }>> {
  return guard(() => keysetPage(db, SERVICE_COLUMNS, sql.fragment`FROM twilio_services WHERE tenant_id = ${tenantId}`, sql.fragment`id`, req))
}

// ---------------------------------------------------------------------------------------------
// Phone numbers of a Service (maskline pool numbers)

export interface PhoneNumberRow {
  number: string; service_id: string; is_reserved: boolean; region: string; created_at: number; updated_at: number
  /** Open sessions of the Service with an active participant on this number. */
  in_use: number
}

const PN_SELECT = sql.fragment`p.number, p.service_id, p.is_reserved, n.region, p.created_at, p.updated_at,
  (SELECT count(DISTINCT t.session_id)::int FROM twilio_participants t WHERE t.active AND t.proxy_number = p.number) AS in_use`

/** Every number of maskline's pool (NUMBER_POOL), to resolve a PN SID or check a PhoneNumber. */
export async function poolNumbers(db: Db): Promise<{ number: string; region: string }[]> {
  return guard(async () => [...await db.any(sql.unsafe`SELECT number, region FROM proxy_numbers ORDER BY number`)] as { number: string; region: string }[])
}

/** 'taken': in another Service (of any account); 'duplicate': already in this one. */
export async function addPhoneNumber(db: Db, tenantId: string, serviceId: string, number: string, reserved: boolean, now: number): Promise<PhoneNumberRow | 'taken' | 'duplicate'> {
  return guard(async () => {
    const inserted = await db.maybeOneFirst(sql.unsafe`
      INSERT INTO twilio_phone_numbers (number, service_id, tenant_id, is_reserved, created_at, updated_at)
      VALUES (${number}, ${serviceId}, ${tenantId}, ${reserved}, ${ts(now)}, ${ts(now)})
      ON CONFLICT (number) DO NOTHING RETURNING number`)
    if (inserted === null) {
      const owner = await db.maybeOneFirst(sql.unsafe`SELECT service_id FROM twilio_phone_numbers WHERE number = ${number}`)
      return owner === serviceId ? 'duplicate' : 'taken'
    }
    return (await getPhoneNumber(db, serviceId, number))!
  })
}

export async function getPhoneNumber(db: Db, serviceId: string, number: string): Promise<PhoneNumberRow | null> {
  return guard(async () => await db.maybeOne(sql.unsafe`
    SELECT ${PN_SELECT} FROM twilio_phone_numbers p JOIN proxy_numbers n USING (number)
    WHERE p.service_id = ${serviceId} AND p.number = ${number}`) as PhoneNumberRow | null)
}

export async function servicePhoneNumbers(db: Db, serviceId: string): Promise<PhoneNumberRow[]> {
  return guard(async () => [...await db.any(sql.unsafe`
    SELECT ${PN_SELECT} FROM twilio_phone_numbers p JOIN proxy_numbers n USING (number)
    WHERE p.service_id = ${serviceId} ORDER BY p.created_at, p.number`)] as PhoneNumberRow[])
}

export async function listPhoneNumbers(db: Db, serviceId: string, req: PageRequest): Promise<Page<PhoneNumberRow & { key: string }>> {
  return guard(() => keysetPage(db, sql.fragment`*`, sql.fragment`FROM (SELECT ${PN_SELECT} FROM twilio_phone_numbers p JOIN proxy_numbers n USING (number) WHERE p.service_id = ${serviceId}) x WHERE true`, sql.fragment`number`, req))
}

export async function setReserved(db: Db, serviceId: string, number: string, reserved: boolean, now: number): Promise<boolean> {
  return guard(async () => (await db.query(sql.unsafe`
    UPDATE twilio_phone_numbers SET is_reserved = ${reserved}, updated_at = ${ts(now)} WHERE service_id = ${serviceId} AND number = ${number}`)).rowCount > 0)
}

/** 'in-use': active participants hold it (Twilio's 80611). */
export async function removePhoneNumber(db: Db, serviceId: string, number: string): Promise<boolean | 'in-use'> {
  return guard(async () => {
    const used = await db.oneFirst(sql.unsafe`SELECT count(*)::int FROM twilio_participants WHERE active AND proxy_number = ${number} AND service_id = ${serviceId}`)
    if (Number(used) > 0) return 'in-use'
    return (await db.query(sql.unsafe`DELETE FROM twilio_phone_numbers WHERE service_id = ${serviceId} AND number = ${number}`)).rowCount > 0
  })
}
