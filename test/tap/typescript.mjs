// The TypeScript loader of tap's test processes (package.json "tap": "node-arg"), in place of the
// ts-node that tap's @tapjs/typescript plugin loads on Node < 22 ("test-env":
// TAP_TYPE_STRIP_ONLY=1 tells that plugin not to load it; it still gives tap the .ts extension).
//
// Why not ts-node: it compiles every imported file again in every test process, about 40 % of what
// each of the suite's ~300 file runs cost (docs/test-suite-time.md). Why not tsx (which
// the service's children and the bench use): its source maps carry the TypeScript text only when
// NODE_V8_COVERAGE is set, and tap records coverage through the inspector, so the coverage report
// would count one statement per file. esbuild (which tsx wraps) emits complete inline source maps.
import { register } from 'node:module'

register('./typescript-hooks.mjs', import.meta.url)
