#!/usr/bin/env node
// Rewrites the code's citations of the old planning documents into citations of the repository's
// own docs, which are numbered so that this is mechanical (docs/contract.md, docs/style.md):
//   "spec 8.4", "Spec 4.1 and 5", "spec section 7"  →  "contract 8.4", "Contract 4.1 and 5", "contract section 7"
//   "DECISIONS 6", "DECISIONS 4-5", "DECISIONS §2"  →  "contract D6", "contract D4-D5", "contract D2"
//   "STYLE 7", "STYLE 1, 3", "STYLE §2"             →  "style 7", "style 1, 3", "style 2"
// in every tracked text file (source, tests, bench, console, SQL, OpenAPI text, docs) but the two
// documents themselves and generated files.
//
//   node scripts/cite-docs.mjs              dry run: every line it would change, then what needs a person
//   node scripts/cite-docs.mjs --write      rewrite the files
//   node scripts/cite-docs.mjs --internal   also list lines citing tracker issues or development sessions
//   node scripts/cite-docs.mjs --stdin      rewrite stdin to stdout (what the test drives)
//
// Every citation, rewritten or already in the new form, must name a section the documents define.
// Exit status: 1 when a citation points nowhere, or (dry run) when lines are left to rewrite.
import { execFileSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

/** Files that are the documents themselves, generated, or this script (its examples above). */
const SKIP = [/^docs\/contract\.md$/, /^docs\/style\.md$/, /^console\/dist\//, /^package-lock\.json$/, /^scripts\/cite-docs\.mjs$/, /^test\/docs\/cite-docs\.test\.ts$/]

// A list after the first number: "4.1, 5", "2.5-2.7", "5.2/5.3", "4.1 and 5". Decisions and style
// sections are single numbers under 20, so a following "429" or "10 s" is never taken for one.
const SEP = String.raw`(?: ?[-–/,] ?| and | or )`
const SPEC = /\b([Ss])pec( section)?(?: ?§ ?| )(?=\d)/g
const DECISIONS = new RegExp(String.raw`\bDECISIONS(?: ?§ ?| )(1?\d)((?:${SEP}1?\d\b(?![.\d]))*)(?![.\d])`, 'g')
const STYLE = new RegExp(String.raw`\bSTYLE(?: ?§ ?| )(1?\d)((?:${SEP}1?\d\b(?![.\d]))*)(?![.\d])`, 'g')

/** One line (or any text) with its citations rewritten. */
export function rewrite(text) {
  return text
    .replace(SPEC, (_, s, section) => `${s === 'S' ? 'Contract' : 'contract'}${section ?? ''} `)
    .replace(DECISIONS, (_, first, rest) => `contract D${first}${rest.replace(/\d+/g, n => `D${n}`)}`)
    .replace(STYLE, (_, first, rest) => `style ${first}${rest}`)
}

// What a rewritten citation points at: "contract 4.1, 5" → 4.1 and 5; "contract D4-D5" → D4, D5.
// A bare number above 9 in a list ("contract 8.2, 429") is not a section.
const CITED = new RegExp(String.raw`\b([Cc]ontract|style)(?: section)? (D?\d+(?:\.\d+)?(?:${SEP}D?\d+(?:\.\d+)?)*)`, 'g')

export function citedTargets(line) {
  const out = []
  for (const m of line.matchAll(CITED)) {
    const doc = m[1].toLowerCase()
    for (const n of m[2].match(/D?\d+(?:\.\d+)?/g)) if (n.includes('.') || n.startsWith('D') || Number(n) <= 9) out.push(`${doc} ${n}`)
  }
  return out
}

/** The sections the two documents define: "## 8. Limits", "### 4.2 Sessions", "**8.4**", "## D5. …". */
function definedTargets(root) {
  const defined = new Set()
  for (const [doc, file] of [['contract', 'docs/contract.md'], ['style', 'docs/style.md']]) {
    const text = readFileSync(join(root, file), 'utf8')
    for (const m of text.matchAll(/^(?:#{2,3} (D?\d+(?:\.\d+)?)\.?|\*\*(\d+\.\d+)\*\*) /gm)) defined.add(`${doc} ${m[1] ?? m[2]}`)
  }
  return defined
}

/** Mentions a person must word (paths into ../shared, the documents by name or "the spec" in prose). */
const REVIEW = /\.\.\/shared|number-masking-spec|DECISIONS|STYLE\.md|\bthe spec\b|\bspec's\b/
/** Citations of the tracker or of development sessions, which a reader of the code cannot follow. */
const ORDINAL = String.raw`(?:\d+(?:st|nd|rd|th)|first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|thirteenth|fourteenth|fifteenth|sixteenth|seventeenth|eighteenth|nineteenth|twentieth)`
// A development session is cited as "(eighth session)" or "bench/RESULTS.md, twentieth session".
const INTERNAL = new RegExp(String.raw`\bissues? #?\d+|(?<![\w&])#\d{1,3}\b|\b${ORDINAL} session\)|(?:\(|RESULTS\.md[^)]*)\b${ORDINAL} session\b`, 'i')

function trackedTextFiles(root) {
  return execFileSync('git', ['ls-files', '-z'], { cwd: root, encoding: 'utf8' })
    .split('\0')
    .filter(f => f && !SKIP.some(re => re.test(f)))
    .map(f => ({ path: f, text: readFileSync(join(root, f)) }))
    .filter(f => !f.text.includes(0)) // binary
    .map(f => ({ path: f.path, text: f.text.toString('utf8') }))
}

function main(argv) {
  if (argv.includes('--stdin')) {
    process.stdout.write(rewrite(readFileSync(0, 'utf8')))
    return 0
  }
  const write = argv.includes('--write')
  const root = execFileSync('git', ['rev-parse', '--show-toplevel'], { encoding: 'utf8' }).trim()
  const defined = definedTargets(root)
  const missing = []
  const review = []
  const internal = []
  let lines = 0
  let files = 0
  for (const f of trackedTextFiles(root)) {
    const out = f.text.split('\n').map((line, i) => {
      const next = rewrite(line)
      const at = `${f.path}:${i + 1}`
      if (next !== line) {
        lines++
        if (!write) console.log(`${at}\n  - ${line.trim()}\n  + ${next.trim()}`)
      }
      for (const target of citedTargets(next)) if (!defined.has(target)) missing.push(`${at}: ${target}`)
      if (REVIEW.test(next)) review.push(`${at}: ${next.trim()}`)
      if (INTERNAL.test(next)) internal.push(`${at}: ${next.trim()}`)
      return next
    }).join('\n')
    if (out !== f.text) {
      files++
      if (write) writeFileSync(join(root, f.path), out)
    }
  }
  console.log(`\n${write ? 'rewrote' : 'would rewrite'} ${lines} lines in ${files} files`)
  console.log(`\n${missing.length} citations point at no section of docs/contract.md or docs/style.md${missing.length ? '\n' + missing.join('\n') : ''}`)
  console.log(`\n${review.length} lines name the old documents in words: reword them by hand\n${review.join('\n')}`)
  if (argv.includes('--internal')) console.log(`\n${internal.length} lines cite tracker issues or sessions\n${internal.join('\n')}`)
  return missing.length > 0 || (!write && lines > 0) ? 1 : 0
}

if (import.meta.url === `file://${process.argv[1]}`) process.exitCode = main(process.argv.slice(2))
