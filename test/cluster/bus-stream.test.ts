// The bus stream is named per database (gateway/bus.ts): two deployments sharing one Redis
// (staging and production, or the services of a parallel test suite) never read, reload for or
// trim each other's messages. BUS_STREAM names it by hand (a rolling upgrade from the release that
// used the one shared name `maskline:bus`, docs/scaling.md).
// Embedded mode (PGlite, in-process bus) has no Redis stream at all: skipped there with the reason.
import t from 'tap'
import { busStream, childData, signupChild } from '../support/child-service.js'
import { create, privateRedis, startNode } from './lib.js'

const embedded = process.env.MASKLINE_TEST_BACKEND === 'embedded' || !process.env.TEST_DATABASE_URL
const singleNode = embedded && 'embedded mode (PGlite, in-process bus) has no Redis stream'

/** The session ids the messages of `stream` name. */
async function sessionIds(looker: ReturnType<Awaited<ReturnType<typeof privateRedis>>['client']>, stream: string): Promise<Set<string>> {
  const entries = await looker.xrange(stream, '-', '+')
  return new Set(entries.map(([, f]) => JSON.parse(f[3] ?? '{}')).filter(m => m.kind === 'session').map(m => m.id as string))
}

t.test('two deployments on one Redis: one stream each; BUS_STREAM names it', { skip: singleNode }, async t => {
  const redis = await privateRedis(t)
  const looker = redis.client()
  const [dataA, dataB, dataC] = await Promise.all([childData(t), childData(t), childData(t)])
  const [a, b, c] = await Promise.all([
    startNode(t, dataA, redis.url), startNode(t, dataB, redis.url), startNode(t, dataC, redis.url, { BUS_STREAM: 'maskline:bus' }),
  ])
  const [streamA, streamB] = await Promise.all([busStream(dataA), busStream(dataB)])
  t.not(streamA, streamB, 'each database has its own stream')
  t.match(streamA, /^maskline:bus:[0-9a-f-]{36}$/, 'named after the database\'s instance id')

  const created = new Map<string, string>()
  for (const [name, node] of [['A', a], ['B', b], ['C', c]] as const) {
    const acc = await signupChild(node!.url)
    const s = await create(node!.url, acc.token, '+14155550101', '+14155550102')
    if (typeof s === 'string') { t.fail(s); return }
    created.set(name, s.id)
  }
  const wanted: Array<[string, string]> = [[streamA, created.get('A')!], [streamB, created.get('B')!], ['maskline:bus', created.get('C')!]]
  for (const deadline = Date.now() + 5_000; ;) {
    const seen = await Promise.all(wanted.map(async ([stream, id]) => (await sessionIds(looker, stream)).has(id)))
    if (seen.every(Boolean) || Date.now() > deadline) break
    await new Promise(r => setTimeout(r, 50))
  }
  const [onA, onB, onShared] = await Promise.all([sessionIds(looker, streamA), sessionIds(looker, streamB), sessionIds(looker, 'maskline:bus')])
  t.same([...onA], [created.get('A')], 'A\'s stream carries A\'s session only')
  t.same([...onB], [created.get('B')], 'B\'s stream carries B\'s session only')
  t.same([...onShared], [created.get('C')], 'BUS_STREAM=maskline:bus: C publishes there, and only C')
  const streams = (await looker.keys('maskline:bus*')).sort()
  t.same(streams, [streamA, streamB, 'maskline:bus'].sort(), 'no other stream: C writes under BUS_STREAM only')
})
