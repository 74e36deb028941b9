// `npm start`: one process serving the REST API, provider callbacks, WebSocket stream and health
// on one port (contract D1). With nothing configured it runs on embedded Postgres and an
// in-process bus, so it needs nothing else installed.
import { loadConfig, ConfigError } from './config.js'
import { startService } from './service.js'
import { flushStdout } from '../api/log.js'
import { installProcessPolicy, installShutdown } from './process-policy.js'

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
// Requests get SHUTDOWN_GRACE_SECONDS, the webhook attempts and the record writer as long again.
installShutdown(process, { log: service.log, close: () => service.close(), exit: code => void flushStdout().finally(() => process.exit(code)), deadlineMs: (config.shutdownGraceSeconds * 2 + 5) * 1000 })
