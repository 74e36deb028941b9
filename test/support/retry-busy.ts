/**
 * A signup that found every password-hashing slot busy is answered 503 at once (contract D3): a
 * test that signs several tenants up together retries it, as a client is told to, a bounded number
 * of times. Services the test helpers start wait 60 s for a slot instead (SIGNUP_MAX_WAIT_MS in
 * test/support/service.ts and child-service.ts); the bare API of test/gateway/harness.ts keeps
 * the 2 s default, so its signups retry.
 */
export async function retryBusy<R extends { status: number }>(send: () => Promise<R>, attempts = 5): Promise<R> {
  // Few and spaced: each attempt counts against the signup throttle of the address (20 a minute).
  for (let i = 1; ; i++) {
    const r = await send()
    if (r.status !== 503 || i >= attempts) return r
    await new Promise(resolve => setTimeout(resolve, 2_000))
  }
}
