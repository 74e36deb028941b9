// A bench script with its own service (bench/<name>.bench.ts) run from the suite: its `bench:`
// lines are recorded as figures, its `# target: <what>: met|NOT met (<detail>)` lines as targets,
// the rest shown as progress. Exit 1 is a target not met (recorded); any other failure fails the step.
import { spawn } from 'node:child_process'
import { createInterface } from 'node:readline'
import { progress } from '../lib/results.js'
import type { Ctx } from './common.js'

export interface ChildBench {
  /** The section its targets are listed under. */
  section: string
  script: string
  args?: readonly string[]
  env?: NodeJS.ProcessEnv
}

export async function childBench(ctx: Ctx, b: ChildBench): Promise<void> {
  const child = spawn(process.execPath, ['--import', 'tsx', b.script, ...(b.args ?? [])], { stdio: ['ignore', 'pipe', 'inherit'], env: b.env ?? process.env })
  const closed = new Promise<number | null>(resolve => child.once('close', resolve))
  for await (const line of createInterface({ input: child.stdout })) {
    const figure = /^bench: (\S+) (\S+) (\S+)$/.exec(line)
    const target = /^# target(?: \(issue \d+\))?: (.*): (met|NOT met) \((.*)\)$/.exec(line)
    if (figure) ctx.results.figure(figure[1]!, Number(figure[2]), figure[3]!)
    else if (target) ctx.results.target(b.section, target[1]!, target[2] === 'met', target[3]!)
    else progress(line.replace(/^# /, ''))
  }
  const code = await closed
  if (code !== 0 && code !== 1) throw new Error(`${b.script} exited ${code}`)
}
