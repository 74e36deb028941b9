// Why a session command is refused. Slugs only (style 4): the API maps each to its problem
// document in one catalog; the engine knows nothing about HTTP. 'not-found' is listed for that
// catalog but never produced by the engine: the caller answers it when neither memory nor the
// store holds the session.

export const REJECTIONS = [
  'not-found',
  'session-end-failed',
  'target-conflict',
  'invalid-target',
  'pool-exhausted',
  'tier-session-limit',
  // Pinned creates only (docs/dual-proxy.md), never the native POST /v1/sessions: a party is
  // already live on its pinned number (the overlap rule), or a pinned number is neither bound to
  // the tenant nor held by it.
  'proxy-in-use',
  'proxy-unavailable',
] as const

export type Rejection = (typeof REJECTIONS)[number]
