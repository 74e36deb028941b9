// Helpers of the provider adapters' suites (telnyx-provider, twilio-provider, provider-router).
import { createServer } from 'node:net'
import { ProviderError } from '../../api/cpaas/provider.js'

/** What a send rejected with; throws when it resolved or rejected with anything but a ProviderError. */
export async function failure(p: Promise<unknown>): Promise<ProviderError> {
  const err = await p.then(() => null, (e: unknown) => e)
  if (!(err instanceof ProviderError)) throw new Error('expected a ProviderError')
  return err
}

/** A local port nothing listens on (bound, then closed): a connection to it is refused. */
export function closedPort(): Promise<number> {
  return new Promise<number>(resolve => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as { port: number }).port
      s.close(() => resolve(p))
    })
  })
}
