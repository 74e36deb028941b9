// The one check of a tenant's webhook target at write time, for both places that take one:
// `POST /v1/webhooks` (`url`) and `PATCH /v1/config` (`webhookUrl`). Until both used it, the second stored
// loopback, private and credential-bearing URLs the first refused; delivery refused them later,
// so the tenant learned nothing until events went missing. The guard that matters still runs on
// every connection (api/webhooks/ssrf.ts pinnedLookup, used by the gateway's transport); this one is early feedback.
import { lookup } from 'node:dns/promises'
import { checkWebhookUrl, isPublicAddress, type UrlRefusal } from './webhooks/ssrf.js'
import { ApiProblem } from './route.js'
import type { Services } from './services.js'

const URL_ISSUES: Record<UrlRefusal, string> = {
  'invalid-url': 'invalid_url',
  'insecure-scheme': 'https_required',
  'credentials-in-url': 'credentials_not_allowed',
  'blocked-address': 'non_public_address',
}

const DNS_TIMEOUT_MS = 2_000

/**
 * A host that resolves to a private address now is refused now. A host that does not resolve is
 * accepted (DNS may be down, or the record not yet published).
 */
async function resolvesPrivate(hostname: string): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined
  try {
    const addrs = await Promise.race([
      lookup(hostname, { all: true }),
      new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error('timeout')), DNS_TIMEOUT_MS) }),
    ])
    return addrs.some(a => !isPublicAddress(a.address))
  } catch {
    return false
  } finally {
    clearTimeout(timer)
  }
}

/** The URL as it will be called, or a 400 naming `field` with the issue of the refusal. */
export async function checkTenantWebhookUrl(s: Services, url: string, o: { slug: 'validation' | 'validation-error'; field: string }): Promise<URL> {
  const allowInsecure = s.config.webhookAllowInsecure
  const refuse = (reason: UrlRefusal) => new ApiProblem(o.slug, `${o.field} must be an https URL of a public host`, {
    errors: [{ field: o.field, issue: URL_ISSUES[reason] }],
  })
  const checked = checkWebhookUrl(url, { allowInsecure })
  if (!checked.ok) throw refuse(checked.reason)
  if (!allowInsecure && await resolvesPrivate(checked.url.hostname)) throw refuse('blocked-address')
  return checked.url
}
