// The console's calls to the service go through the client SDK (sdk/src): the dashboard token of
// the login (contract 4.1) as its credential, problems as MasklineError. The token lives in
// sessionStorage: it is gone with the tab, and it is never put into the page. The SDK's client
// module is imported directly (not its index), so the page does not carry webhook verification.
import { Maskline } from '../../sdk/src/client.js'
import { MasklineError } from '../../sdk/src/errors.js'
import type { DashboardLogin, Role as SdkRole } from '../../sdk/src/types.js'

export { MasklineError }
export type Role = SdkRole
export type Login = DashboardLogin

const KEY = 'maskline.console'

let current: Login | null = null
let client: Maskline | null = null
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
  client = null
  sessionStorage.removeItem(KEY)
  onLoggedOut()
}

export const canAct = (l: Login | null): boolean => l !== null && (l.user.role === 'OWNER' || l.user.role === 'ADMIN')

export async function login(email: string, password: string): Promise<Login> {
  const l = await new Maskline({ baseUrl: location.origin }).auth.login({ email, password })
  current = l
  client = null
  sessionStorage.setItem(KEY, JSON.stringify(l))
  return l
}

/** The SDK client of the logged-in user (its dashboard token). */
export function sdk(): Maskline {
  const l = session()
  if (!client || !l) client = new Maskline({ baseUrl: location.origin, ...(l ? { token: l.accessToken } : {}) })
  return client
}

/** One call through the SDK; a 401 logs out (the token lapsed after 24 h). */
export async function api<T>(fn: (c: Maskline) => Promise<T>): Promise<T> {
  try {
    return await fn(sdk())
  } catch (err) {
    if (err instanceof MasklineError && err.status === 401) logout()
    throw err
  }
}
