// The soak's webhook receiver in a process of its own, as a tenant's endpoint would be: its
// request handling then takes nothing from the load generator's event loop (which paces the mix
// and reads 500 stream sockets), and the load generator's pauses take nothing from it.
// Parent: startReceiverProcess(). Child (this file run with --import tsx): the receiver of
// test/support/webhook-receiver.ts, driven over IPC.
import { fork } from 'node:child_process'
import { fileURLToPath } from 'node:url'

type ToChild = { kind: 'secret'; secret: string } | { kind: 'ids' } | { kind: 'close' }
type FromChild = { kind: 'url'; url: string } | { kind: 'ids'; ids: string[] }

export interface ReceiverProcess {
  url: string
  setSecret(secret: string): void
  /** Event ids of the deliveries answered 2xx so far. */
  acceptedIds(): Promise<string[]>
  close(): Promise<void>
}

export async function startReceiverProcess(): Promise<ReceiverProcess> {
  const child = fork(fileURLToPath(import.meta.url), [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  const exited = new Promise<void>(resolve => child.once('exit', () => resolve()))
  const next = (kind: FromChild['kind']) => new Promise<FromChild>((resolve, reject) => {
    const onMessage = (m: FromChild) => { if (m.kind === kind) { child.off('message', onMessage); resolve(m) } }
    child.on('message', onMessage)
    void exited.then(() => reject(new Error('the webhook receiver process exited')))
  })
  const send = (m: ToChild) => { child.send(m) }
  const { url } = await next('url') as { url: string }
  return {
    url,
    setSecret: secret => send({ kind: 'secret', secret }),
    async acceptedIds() {
      const reply = next('ids')
      send({ kind: 'ids' })
      return (await reply as { ids: string[] }).ids
    },
    async close() {
      if (child.exitCode === null && child.signalCode === null) send({ kind: 'close' })
      await exited
    },
  }
}

if (process.send && process.argv[1] === fileURLToPath(import.meta.url)) {
  const { startWebhookReceiver } = await import('../../test/support/webhook-receiver.js')
  const receiver = await startWebhookReceiver()
  const reply = (m: FromChild) => process.send!(m)
  process.on('message', (m: ToChild) => {
    if (m.kind === 'secret') receiver.setSecret(m.secret)
    else if (m.kind === 'ids') reply({ kind: 'ids', ids: receiver.accepted().map(d => d.json.id) })
    else void receiver.close().then(() => process.exit(0))
  })
  process.on('disconnect', () => { void receiver.close().then(() => process.exit(0)) })
  reply({ kind: 'url', url: receiver.url })
}
