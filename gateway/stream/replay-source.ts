// The outbox as the source of a stream resume (gateway/stream/resume.ts): every event is written in
// the transaction of its change (sql/outbox.ts), on every node's shared database, so a client
// resumes on any node.
import { outboxHasEvent, outboxRowsAfter } from '../../sql/outbox.js'
import type { Db } from '../../sql/transaction.js'
import type { ReplaySource } from './resume.js'

export function outboxReplaySource(db: Db): ReplaySource {
  return {
    exists: (tenantId, id) => outboxHasEvent(db, tenantId, id),
    page: q => outboxRowsAfter(db, { afterId: q.afterId, beforeId: q.beforeId, tenantIds: [q.tenantId], types: q.types, limit: q.limit }),
  }
}
