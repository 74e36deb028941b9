// Before a load run: send the first requests of its file once and check the answers look right
// (a Dial, not a Reject; a session, not a 401). A load run against a misconfigured service would
// otherwise measure how fast it says no.
import { readRequestFile } from '../lib/request-file.js'
import type { Ctx } from './common.js'

export async function preflight(ctx: Ctx, name: string, url: string, file: string, expect: { status: number; body: RegExp }): Promise<boolean> {
  const problems: string[] = []
  for (const r of readRequestFile(file, 3)) {
    try {
      const res = await fetch(url + r.path, { method: r.method, headers: r.headers, body: r.body })
      const text = await res.text()
      if (res.status !== expect.status || !expect.body.test(text)) problems.push(`${r.method} ${r.path.split('?')[0]} → ${res.status} ${text.slice(0, 160).replace(/\s+/g, ' ')}`)
    } catch (err) {
      problems.push(`${r.method} ${r.path.split('?')[0]} → ${(err as Error).message}`)
    }
  }
  if (problems.length) ctx.results.note(`${name}: pre-flight answers were not as expected (wanted ${expect.status} ${expect.body}): ${problems.join('; ')}`)
  return problems.length === 0
}
