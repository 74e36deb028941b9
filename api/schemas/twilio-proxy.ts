// The Twilio Proxy façade's credentials (docs/twilio-proxy.md): what the tenant's OWNER obtains
// to point a Twilio SDK at /proxy.
import { Type } from '@sinclair/typebox'
import { Nullable, Timestamp } from './common.js'

export const TwilioCredentialsIssued = Type.Object({
  accountSid: Type.String({ pattern: '^AC[0-9a-f]{32}$', description: 'The Basic user name (the SDK\'s accountSid); it stays the same across rotations' }),
  authToken: Type.String({ pattern: '^[0-9a-f]{32}$', description: 'The Basic password (the SDK\'s authToken). Shown once: only a MAC of it is kept; POST again to rotate it' }),
  rotatedAt: Timestamp,
  baseUrl: Type.String({ description: 'What to set client.proxy.baseUrl to' }),
})

export const TwilioCredentialsView = Type.Object({
  accountSid: Nullable(Type.String({ pattern: '^AC[0-9a-f]{32}$' })),
  baseUrl: Type.String(),
})

export const TwilioApiKeyIssued = Type.Object({
  sid: Type.String({ pattern: '^SK[0-9a-f]{32}$', description: 'The Basic user name; give the SDK the accountSid too: twilio(sid, secret, { accountSid })' }),
  secret: Type.String({ pattern: '^[0-9a-f]{32}$', description: 'The Basic password. Shown once: only a MAC of it is kept' }),
  accountSid: Type.String({ pattern: '^AC[0-9a-f]{32}$' }),
})

export const TwilioApiKeyParams = Type.Object({ sid: Type.String({ pattern: '^SK[0-9a-f]{32}$' }) })
