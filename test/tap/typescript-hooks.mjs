// Module hooks for test/tap/typescript.mjs: .ts files compiled by esbuild (types erased, inline
// source map with the source text, for stack traces and coverage), and the `./x.js` specifiers
// that TypeScript's NodeNext resolution writes for `./x.ts` resolved to the .ts file.
import { readFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { transform } from 'esbuild'

export async function resolve(specifier, context, nextResolve) {
  try {
    return await nextResolve(specifier, context)
  } catch (err) {
    if (err?.code !== 'ERR_MODULE_NOT_FOUND' || !specifier.endsWith('.js') || !/^(\.|file:)/.test(specifier)) throw err
    return nextResolve(`${specifier.slice(0, -3)}.ts`, context)
  }
}

export async function load(url, context, nextLoad) {
  if (!url.startsWith('file:') || !url.endsWith('.ts')) return nextLoad(url, context)
  const path = fileURLToPath(url)
  const { code } = await transform(await readFile(path, 'utf8'), {
    loader: 'ts', format: 'esm', target: 'node20', sourcemap: 'inline', sourcefile: path,
  })
  return { format: 'module', source: code, shortCircuit: true }
}
