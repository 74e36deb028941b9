// List paging (docs/twilio-proxy.md): PageSize (default 50, at most 100), Page (echoed), PageToken (an
// opaque keyset cursor this façade issued). Every meta URL is absolute on the public base URL:
// the SDK follows next_page_url verbatim.
import type { Keyset, PageRequest } from '../../sql/twilio-proxy-page.js'
import { invalidParam } from './errors.js'
import type { Params } from './params.js'

const DEFAULT_SIZE = 50
const MAX_SIZE = 100

export function pageRequest(q: Params): PageRequest & { page: number } {
  const raw = q.int('PageSize', 1, 1_000_000) ?? DEFAULT_SIZE
  const size = Math.min(raw, MAX_SIZE)
  const page = q.int('Page', 0, 1_000_000) ?? 0
  const token = q.str('PageToken', 200)
  if (token === undefined || token === '') return { size, page, cursor: null }
  const cursor = decodeToken(token)
  if (!cursor) throw invalidParam('PageToken')
  return { size, page, cursor }
}

export interface ListPage<T> { rows: T[]; next: Keyset | null; previous: Keyset | null }

export function listBody(key: string, base: string, path: string, req: { size: number; page: number; tokenText?: string | undefined }, page: ListPage<unknown>, items: unknown[]) {
  const at = (p: number, token?: string) => `${base}${path}?PageSize=${req.size}&Page=${p}${token ? `&PageToken=${token}` : ''}`
  return {
    [key]: items,
    meta: {
      page: req.page,
      page_size: req.size,
      first_page_url: at(0),
      previous_page_url: page.previous && req.page > 0 ? at(req.page - 1, encodeToken({ ...page.previous, dir: 'before' })) : null,
      url: at(req.page, req.tokenText),
      next_page_url: page.next ? at(req.page + 1, encodeToken({ ...page.next, dir: 'after' })) : null,
      key,
    },
  }
}

export function encodeToken(k: Keyset): string {
  return (k.dir === 'after' ? 'PA' : 'PB') + Buffer.from(`${k.ms}_${k.id}`).toString('base64url')
}

function decodeToken(t: string): Keyset | null {
  const kind = t.slice(0, 2)
  if (kind !== 'PA' && kind !== 'PB') return null
  const text = Buffer.from(t.slice(2), 'base64url').toString('utf8')
  const m = /^(\d{1,15})_([0-9a-f-]{36}|\+?[0-9]{1,16})$/.exec(text)
  if (!m) return null
  return { ms: Number(m[1]), id: m[2]!, dir: kind === 'PA' ? 'after' : 'before' }
}
