// GET /v1/sessions: newest first, state filter, and a cursor that walks every row exactly once.
import t from 'tap'
import { startTestService } from '../support/service.js'

t.test('pagination walks every session exactly once', async t => {
  const api = await startTestService(t)
  const acct = await api.signup()
  const ids: string[] = []
  for (let i = 0; i < 23; i++) {
    const r = await api.req('POST', '/v1/sessions', { token: acct.token, body: { agentPhone: api.phone(100 + i), customerPhone: api.phone(200 + i) } })
    t.equal(r.status, 201)
    ids.push(r.body.id)
  }
  const seen: string[] = []
  let after: string | null = null
  let pages = 0
  do {
    const q: string = after ? `?limit=5&after=${encodeURIComponent(after)}` : '?limit=5'
    const r = await api.req('GET', `/v1/sessions${q}`, { token: acct.token })
    t.equal(r.status, 200)
    t.equal(r.body.pagination.count, r.body.data.length)
    for (const s of r.body.data) seen.push(s.id)
    after = r.body.pagination.after
    pages++
  } while (after && pages < 20)
  t.equal(seen.length, 23)
  t.same([...seen].sort(), [...ids].sort(), 'every row once')
  t.same(seen, [...ids].reverse(), 'newest first')

  const ended = await api.req('POST', `/v1/sessions/${ids[0]}/end`, { token: acct.token })
  t.equal(ended.status, 200)
  const grace = await api.req('GET', '/v1/sessions?state=GRACE_PERIOD', { token: acct.token })
  t.same(grace.body.data.map((s: { id: string }) => s.id), [ids[0]])

  const bad = await api.req('GET', '/v1/sessions?limit=101', { token: acct.token })
  t.equal(bad.status, 400)
  const badState = await api.req('GET', '/v1/sessions?state=DONE', { token: acct.token })
  t.equal(badState.status, 400)
  const badCursor = await api.req('GET', '/v1/sessions?after=not-a-cursor', { token: acct.token })
  t.equal(badCursor.status, 400)
})
