// gateway/http/compile.ts: what a route's compilation checks at boot and what only the tests'
// services check (`checks`): the schemas against the JSON Schema meta-schema, and the replies.
import t from 'tap'
import { Type } from '@sinclair/typebox'
import { route } from '../../api/route.js'
import { compileRoute } from '../../gateway/http/compile.js'

const def = (body: ReturnType<typeof Type.Unsafe>) => route({
  method: 'POST', path: '/v1/things', auth: 'none', summary: 'A thing', body,
  response: { 200: Type.Object({ id: Type.String() }) }, problems: [],
  handler: () => ({ status: 200, body: { id: 'x' } }),
})

t.test('with checks, a schema that is not valid JSON Schema fails the compilation, naming the route', async t => {
  const bad = def(Type.Unsafe({ type: 'string', minLength: -1 }))
  t.throws(() => compileRoute(bad, true), { message: /POST \/v1\/things body: not a valid JSON Schema: .*minLength/ })
  t.doesNotThrow(() => compileRoute(bad), 'without checks (the service): trusted, not checked')
  t.doesNotThrow(() => compileRoute(def(Type.Unsafe({ type: 'string', minLength: 1 })), true))
})

t.test('response checkers are built with checks only', async t => {
  const ok = def(Type.Unsafe({ type: 'string' }))
  const checked = compileRoute(ok, true).responseChecks.get(200)!
  t.equal(checked({ id: 'x' }), true)
  t.equal(checked({ id: 5 }), false)
  t.equal(compileRoute(ok).responseChecks.size, 0)
  t.ok(compileRoute(ok).serializers.get(200), 'the serializer is built either way')
})
