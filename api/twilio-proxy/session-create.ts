// A session created with its Participants (docs/twilio-proxy.md) in few round trips: what the
// choice of both numbers needs is read in one statement, the session and its participants are
// written in one, and the native session behind them is linked in the native create's own
// transaction. Answers as adding them one by one would: the UniqueName first (80603), then each
// participant in order, and nothing is created when one is refused. A pair that a concurrent
// create took (the database's pair index decides) is chosen again once, as addParticipant does.
import { getSession, deleteSession, insertParticipant, type NewParticipant, type NewSession, type ParticipantRow, type SessionRow } from '../../sql/twilio-proxy-sessions.js'
import { choiceInputs, insertSessionWith } from '../../sql/twilio-proxy-create.js'
import type { ServiceRow } from '../../sql/twilio-proxy.js'
import type { Ctx } from './context.js'
import { rule } from './errors.js'
import {
  busyOf, checkParticipant, chooseNumber, newParticipant, openNativeFor, pairTakenRequested, requestedNumber, simultaneous,
  type CheckedParticipant, type Chooser, type ParticipantInput,
} from './participants.js'

const nameTaken = () => rule(80603, 'Session with this UniqueName already exists in the Service', 409)

interface Planned { who: CheckedParticipant; k: Chooser; requested: string | undefined; busy: Set<string>; row: NewParticipant }

export async function createSession(c: Ctx, service: ServiceRow, s: NewSession, inputs: readonly ParticipantInput[]): Promise<SessionRow> {
  const db = c.services.db
  let planned: Planned[]
  try {
    planned = await plan(c, service, s.id, inputs)
  } catch (err) {
    // As when the session was written first: a taken UniqueName is the answer.
    if (s.unique_name !== null && await getSession(db, service.id, { uniqueName: s.unique_name })) throw nameTaken()
    throw err
  }
  const written = await insertSessionWith(db, s, planned.map(p => p.row))
  if (written === 'conflict') throw nameTaken()
  const session: SessionRow = { ...s, native_session_id: null, date_ended: null, date_last_interaction: null, closed_reason: null, updated_at: s.created_at }
  try {
    const live: ParticipantRow[] = []
    for (const p of planned) {
      const row = written.has(p.row.id) ? p.row : await chooseAgain(c, service, s.id, p, live[0]?.proxy_number)
      live.push({ ...row, date_deleted: null, updated_at: row.created_at })
    }
    if (live.length < 2) return session
    return await openNativeFor(c, session, live[0]!, live[1]!, planned[1]!.who.identifier)
  } catch (err) {
    await deleteSession(db, s.id) // a session whose participants were refused is not created
    throw err
  }
}

/** Each participant checked and given its number, in order, from one read of the store. */
async function plan(c: Ctx, service: ServiceRow, sessionId: string, inputs: readonly ParticipantInput[]): Promise<Planned[]> {
  // Every valid identifier's inputs in one read; a refusal still comes in the participants' order.
  const checked = inputs.map((input): CheckedParticipant | { err: unknown } => { try { return checkParticipant(c, input) } catch (err) { return { err } } })
  const hashes = checked.flatMap(w => ('err' in w ? [] : [w.hash]))
  const k: Chooser | null = hashes.length ? { service, inputs: await choiceInputs(c.services.db, service.id, hashes) } : null
  const out: Planned[] = []
  for (const w of checked) {
    if ('err' in w) throw w.err
    const who = w
    if (out.some(p => p.who.hash === who.hash)) throw rule(80103, 'Participant is already in the session')
    const requested = requestedNumber(k!.inputs.pool, who.input)
    const busy = busyOf(k!, who)
    const number = chooseNumber(k!, who, busy, requested, out[0]?.row.proxy_number)
    out.push({ who, k: k!, requested, busy, row: newParticipant(c, service, sessionId, who, number) })
  }
  return out
}

/** Its pair was taken by a concurrent create: once more without that number (80604 when it was asked for). */
async function chooseAgain(c: Ctx, service: ServiceRow, sessionId: string, p: Planned, partner: string | undefined): Promise<NewParticipant> {
  if (p.requested !== undefined) throw pairTakenRequested()
  p.busy.add(p.row.proxy_number)
  const row = newParticipant(c, service, sessionId, p.who, chooseNumber(p.k, p.who, p.busy, undefined, partner))
  if (await insertParticipant(c.services.db, row) === 'pair-taken') throw simultaneous()
  return row
}
