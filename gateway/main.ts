// `npm start`: one process serving the REST API, provider callbacks, WebSocket stream and health
// on one port (DECISIONS 1). With nothing configured it runs on embedded Postgres and an
// in-process bus, so it needs nothing else installed.
import { loadConfig, ConfigError } from './config.js'
import { startService } from './service.js'
import { installProcessPolicy } from './process-policy.js'

let config
try {
  config = loadConfig()
} catch (err) {
  if (err instanceof ConfigError) {
    process.stderr.write(`maskline: ${err.message}\n`)
    process.exit(2)
  }
  throw err
}

const service = await startService({ config })
installProcessPolicy(process, { log: service.log, close: () => service.close(), exit: code => process.exit(code) })
let stopping = false
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (stopping) return
    stopping = true
    service.log.info({ signal }, 'shutting down')
    service.close().then(() => process.exit(0), () => process.exit(1))
  })
}
