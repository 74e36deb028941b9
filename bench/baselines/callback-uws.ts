// Baseline: the ceiling of the callback work on uWS — read the form body, parse it, one Map.get
// for (proxy, caller), answer a TeXML Dial. No signature, no records, no logging.
import uWS from 'uWebSockets.js'
import { parseForm } from '../../api/cpaas/form.js'
import { routeTable } from './route-table.js'

const port = Number(process.argv[2] ?? 0)
const sessions = Number(process.argv[3] ?? 100_000)
const table = routeTable(sessions)

uWS.App().post('/v1/webhooks/cpaas/voice', (res, _req) => {
  let buf: Buffer | null = null
  res.onAborted(() => { buf = null })
  res.onData((chunk, last) => {
    const c = Buffer.from(chunk)
    buf = buf ? Buffer.concat([buf, c]) : c
    if (!last) return
    const f = parseForm(buf)
    const to = f?.['To'] ?? ''
    const from = f?.['From'] ?? ''
    const other = table.get(to)?.get(from)
    res.cork(() => {
      res.writeHeader('content-type', 'application/xml')
      res.end(other
        ? `<?xml version="1.0" encoding="UTF-8"?><Response><Dial callerId="${to}"><Number>${other}</Number></Dial></Response>`
        : '<?xml version="1.0" encoding="UTF-8"?><Response><Reject/></Response>')
    })
  })
}).listen('127.0.0.1', port, sock => {
  if (!sock) process.exit(1)
  process.stdout.write(`listening ${uWS.us_socket_local_port(sock)}\n`)
})
