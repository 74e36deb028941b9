// The provider callbacks (contract 4.10, contract D5), one handler a module, bound to one shared
// context: what routes.ts serves. Every answer comes from memory; what a callback changes is
// queued for the record writer (sql/record-writer.ts) behind the answer, except an inbound SMS,
// answered once its forward is handed over (sms.ts).
import { createCallbackContext, type CallbackDeps } from './context.js'
import type { CallbackHandlers } from './routes.js'
import { voice } from './voice.js'
import { voiceStatus } from './status.js'
import { dialStatus } from './dial-status.js'
import { recording } from './recording.js'
import { sms } from './sms.js'
import type { Dialect } from '../dialect.js'
import { TELNYX_DIALECT } from '../telnyx/texml.js'

export type { CallbackDeps } from './context.js'

/** One set a provider: its dialect says where its callbacks go and how they are answered. */
export function createCallbackHandlers(deps: CallbackDeps, dialect: Dialect = TELNYX_DIALECT): CallbackHandlers {
  const ctx = createCallbackContext(deps, dialect)
  return {
    voice: req => voice(ctx, req),
    voiceStatus: req => voiceStatus(ctx, req),
    dialStatus: req => dialStatus(ctx, req),
    recording: req => recording(ctx, req),
    sms: req => sms(ctx, req),
  }
}
