// Debian's nginx, started for one test with the shipped deploy/nginx/maskline.conf: everything
// under its own temp prefix (pid, logs, temp paths, certificate), in the foreground, listening on
// a free 127.0.0.1 port and proxying to the service the test started. The shipped file is used
// as is except for the values an operator fills in (upstream, listen, certificate, log path);
// each of those must be found exactly once, so a change to the file that the template no longer
// fits fails loudly instead of testing something else.
import { spawn, type ChildProcess } from 'node:child_process'
import { accessSync, constants, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createConnection, createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { delimiter, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { selfSignedCertificate } from './self-signed.js'

export const SHIPPED_CONF = fileURLToPath(new URL('../../deploy/nginx/maskline.conf', import.meta.url))

/** The nginx binary: $NGINX, /usr/sbin/nginx (Debian), or on PATH; null when there is none. */
export function findNginx(): string | null {
  const candidates = [process.env.NGINX, '/usr/sbin/nginx', ...(process.env.PATH ?? '').split(delimiter).map(d => join(d, 'nginx'))]
  for (const c of candidates) {
    if (!c) continue
    try { accessSync(c, constants.X_OK); return c } catch { /* next */ }
  }
  return null
}

/** Replaces the one line matching `re`; throws unless there is exactly one. */
function replaceOnce(text: string, re: RegExp, by: string, what: string): string {
  const hits = text.match(new RegExp(re.source, re.flags.includes('g') ? re.flags : re.flags + 'g'))?.length ?? 0
  if (hits !== 1) throw new Error(`deploy/nginx/maskline.conf: expected one ${what} line, found ${hits}; update test/deploy/nginx.ts`)
  return text.replace(re, by)
}

/** The shipped configuration with this instance's values in place of the operator's. */
export function templateConf(shipped: string, v: { upstream: string; listen: string; cert: string; key: string; accessLog: string }): string {
  let c = shipped
  c = replaceOnce(c, /^(\s*)server 127\.0\.0\.1:8080;$/m, `$1server ${v.upstream};`, 'upstream server')
  c = replaceOnce(c, /^(\s*)listen 443 ssl;$/m, `$1listen ${v.listen} ssl;`, 'IPv4 listen')
  c = replaceOnce(c, /^\s*listen \[::\]:443 ssl;\n/m, '', 'IPv6 listen') // the test listens on 127.0.0.1 only
  c = replaceOnce(c, /^(\s*ssl_certificate)(\s+)\/etc\/ssl\/maskline\/fullchain\.pem;$/m, `$1$2${v.cert};`, 'ssl_certificate')
  c = replaceOnce(c, /^(\s*ssl_certificate_key)(\s+)\/etc\/ssl\/maskline\/privkey\.pem;$/m, `$1$2${v.key};`, 'ssl_certificate_key')
  c = replaceOnce(c, /^(\s*access_log) \/var\/log\/nginx\/maskline-access\.log maskline;$/m, `$1 ${v.accessLog} maskline;`, 'access_log')
  return c
}

async function freePort(): Promise<number> {
  const srv = createServer()
  await new Promise<void>((resolve, reject) => srv.once('error', reject).listen(0, '127.0.0.1', resolve))
  const port = (srv.address() as { port: number }).port
  await new Promise(r => srv.close(r))
  return port
}

function canConnect(port: number): Promise<boolean> {
  return new Promise(resolve => {
    const s = createConnection({ host: '127.0.0.1', port }, () => { s.destroy(); resolve(true) })
    s.on('error', () => resolve(false))
  })
}

export interface RunningNginx {
  port: number
  /** https://127.0.0.1:<port> */
  url: string
  /** The certificate it serves (PEM): pass as `ca`. */
  ca: string
  accessLog: () => string
  stop(): Promise<void>
}

interface TapLike { teardown(fn: () => unknown): void }

/**
 * nginx in the foreground (`daemon off`) as a single process (`master_process off`: no worker
 * switching to another user, so the temp dirs of this root-or-not test process stay usable),
 * proxying to `upstream` (host:port). Stopped at teardown.
 */
export async function startNginx(t: TapLike, bin: string, upstream: string): Promise<RunningNginx> {
  const dir = mkdtempSync(join(tmpdir(), 'maskline-nginx-'))
  const { cert, key } = selfSignedCertificate()
  writeFileSync(join(dir, 'cert.pem'), cert)
  writeFileSync(join(dir, 'key.pem'), key, { mode: 0o600 })
  for (const d of ['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) mkdirSync(join(dir, d))
  const accessLog = join(dir, 'access.log')
  const errorLog = join(dir, 'error.log')

  let child: ChildProcess
  let port: number
  let stderr = ''
  for (let attempt = 1; ; attempt++) {
    port = await freePort()
    writeFileSync(join(dir, 'maskline.conf'), templateConf(readFileSync(SHIPPED_CONF, 'utf8'), {
      upstream, listen: `127.0.0.1:${port}`, cert: join(dir, 'cert.pem'), key: join(dir, 'key.pem'), accessLog,
    }))
    writeFileSync(join(dir, 'nginx.conf'), [
      'daemon off;',
      'master_process off;',
      `pid ${join(dir, 'nginx.pid')};`,
      `error_log ${errorLog} info;`,
      'events { worker_connections 256; }',
      'http {',
      // What Debian's /etc/nginx/nginx.conf says at http level: the shipped server must override it.
      '  ssl_protocols TLSv1 TLSv1.1 TLSv1.2 TLSv1.3;',
      `  access_log ${join(dir, 'other-access.log')};`,
      ...['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map(d => `  ${d === 'body' ? 'client_body' : d}_temp_path ${join(dir, d)};`),
      `  include ${join(dir, 'maskline.conf')};`,
      '}',
      '',
    ].join('\n'))
    stderr = ''
    const proc = spawn(bin, ['-p', dir, '-c', join(dir, 'nginx.conf'), '-e', errorLog], { stdio: ['ignore', 'ignore', 'pipe'] })
    proc.stderr!.on('data', d => { stderr += d })
    let exited = false
    proc.on('exit', () => { exited = true })
    const until = Date.now() + 10_000
    while (!exited && Date.now() < until && !(await canConnect(port))) await new Promise(r => setTimeout(r, 20))
    if (!exited && Date.now() < until) { child = proc; break }
    proc.kill('SIGKILL')
    const log = (() => { try { return readFileSync(errorLog, 'utf8') } catch { return '' } })()
    if (attempt < 3 && /Address already in use/.test(log + stderr)) continue
    rmSync(dir, { recursive: true, force: true })
    throw new Error(`nginx did not start: ${stderr}\n${log}`)
  }

  const proc = child
  const stop = async () => {
    if (proc.exitCode === null && proc.signalCode === null) {
      const gone = new Promise(r => proc.once('exit', r))
      proc.kill('SIGTERM')
      await gone
    }
    rmSync(dir, { recursive: true, force: true })
  }
  t.teardown(stop)
  return { port, url: `https://127.0.0.1:${port}`, ca: cert, accessLog: () => readFileSync(accessLog, 'utf8'), stop }
}
