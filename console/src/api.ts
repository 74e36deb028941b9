// The console's calls to the service: the dashboard token (spec 4.1) in Authorization, JSON in and
// out, RFC 7807 problems turned into ApiError. The token lives in sessionStorage: it is gone with
// the tab, and it is never put into the page.
export type Role = 'OWNER' | 'ADMIN' | 'OPERATOR'

export interface Login {
  accessToken: string
  user: { id: string; email: string; role: Role; tenantId: string }
  tenant: { id: string; name: string; tier: string; status: string }
}

const KEY = 'maskline.console'

export class ApiError extends Error {
  constructor(readonly status: number, readonly slug: string, message: string) {
    super(message)
    this.name = 'ApiError'
  }
}

let current: Login | null = null
let onLoggedOut: () => void = () => {}

export function session(): Login | null {
  if (current) return current
  try {
    const raw = sessionStorage.getItem(KEY)
    current = raw ? (JSON.parse(raw) as Login) : null
  } catch {
    current = null
  }
  return current
}

export function whenLoggedOut(fn: () => void): void {
  onLoggedOut = fn
}

export function logout(): void {
  current = null
  sessionStorage.removeItem(KEY)
  onLoggedOut()
}

export const canAct = (l: Login | null): boolean => l !== null && (l.user.role === 'OWNER' || l.user.role === 'ADMIN')

export async function login(email: string, password: string): Promise<Login> {
  const l = await call<Login>('POST', '/v1/auth/dashboard/login', { email, password }, false)
  current = l
  sessionStorage.setItem(KEY, JSON.stringify(l))
  return l
}

/** `/v1/console/...` and the public endpoints; a 401 logs out (the token lapsed after 24 h). */
export async function call<T>(method: string, path: string, body?: unknown, auth = true): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' }
  const l = session()
  if (auth && l) headers.authorization = `Bearer ${l.accessToken}`
  if (body !== undefined) headers['content-type'] = 'application/json'
  const res = await fetch(path, { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) })
  const text = await res.text()
  const json: unknown = text ? JSON.parse(text) : null
  if (!res.ok) {
    const p = (json ?? {}) as { type?: string; title?: string; detail?: string }
    const slug = p.type?.split('/').pop() ?? 'error'
    if (res.status === 401 && auth) logout()
    throw new ApiError(res.status, slug, p.detail ?? p.title ?? `HTTP ${res.status}`)
  }
  return json as T
}

export const get = <T>(path: string): Promise<T> => call<T>('GET', path)
