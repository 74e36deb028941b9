#!/usr/bin/env node
// Long fuzz runs: `npm run fuzz -- --fuzz 50000 [--seed S] [--embedded | --services]`.
// Runs test/api/fuzz.test.ts with FUZZ_RUNS=N (npm test runs 2,000) on both backends, like
// test/run.mjs, without the per-file timeout. A failure prints its seed: pass it back to replay.
import { spawn } from 'node:child_process'

const args = process.argv.slice(2)
const value = name => { const i = args.indexOf(name); return i === -1 ? undefined : args[i + 1] }
const runs = Number(value('--fuzz') ?? 20000)
if (!Number.isInteger(runs) || runs < 2) {
  console.error('usage: npm run fuzz -- --fuzz N [--seed S] [--embedded | --services]')
  process.exit(2)
}
const seed = value('--seed')
const backends = [
  ['services', { TEST_DATABASE_URL: process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test', TEST_REDIS_URL: process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379', MASKLINE_TEST_BACKEND: 'services' }],
  ['embedded', { TEST_DATABASE_URL: '', TEST_REDIS_URL: '', MASKLINE_TEST_BACKEND: 'embedded' }],
].filter(([name]) => !args.includes(`--${name === 'services' ? 'embedded' : 'services'}`))

let failed = 0
for (const [name, env] of backends) {
  console.log(`\n# fuzz: ${runs} cases, ${name}${seed ? `, seed ${seed}` : ''}`)
  const code = await new Promise(resolve => {
    const child = spawn('npx', ['tap', '--timeout=0', '--disable-coverage', 'test/api/fuzz.test.ts'], {
      stdio: 'inherit', env: { ...process.env, ...env, FUZZ_RUNS: String(runs), ...(seed ? { FUZZ_SEED: seed } : {}) },
    })
    child.on('close', resolve)
  })
  if (code !== 0) failed++
}
process.exit(failed ? 1 : 0)
