// Baseline: what a user would otherwise pick — the same callback handler on fastify.
import Fastify from 'fastify'
import { parseForm } from '../../api/cpaas/form.js'
import { routeTable } from './route-table.js'

const port = Number(process.argv[2] ?? 0)
const sessions = Number(process.argv[3] ?? 100_000)
const table = routeTable(sessions)
const app = Fastify({ logger: false })
app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'buffer' }, (_req, body, done) => done(null, parseForm(body as Buffer)))
app.post('/v1/webhooks/cpaas/voice', async (req, reply) => {
  const f = req.body as Record<string, string> | null
  const to = f?.['To'] ?? ''
  const from = f?.['From'] ?? ''
  const other = table.get(to)?.get(from)
  reply.header('content-type', 'application/xml')
  return other
    ? `<?xml version="1.0" encoding="UTF-8"?><Response><Dial callerId="${to}"><Number>${other}</Number></Dial></Response>`
    : '<?xml version="1.0" encoding="UTF-8"?><Response><Reject/></Response>'
})
const addr = await app.listen({ host: '127.0.0.1', port })
process.stdout.write(`listening ${new URL(addr).port}\n`)
