import js from '@eslint/js'
import tseslint from 'typescript-eslint'

export default tseslint.config(
  { ignores: ['dist/', 'sdk/dist/', 'node_modules/', '.tap/', 'coverage/', 'data/', 'bench/results/', 'console/dist/', 'test/artifacts/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-console': 'error',
    },
  },
  // Type-aware rules: a promise nobody awaits or catches is how a background writer
  // wedges or Node 20 exits on an unhandled rejection; a promise passed where a callback's result
  // is ignored (uWS handlers, timers, event listeners) is the same fault one step removed.
  {
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      // tap's test() and t.test() return promises the runner itself awaits.
      '@typescript-eslint/no-floating-promises': ['error', { allowForKnownSafeCalls: [
        { from: 'package', package: 'tap', name: ['test', 'only', 'skip', 'todo'] },
        { from: 'package', package: '@tapjs/core', name: ['test', 'only', 'skip', 'todo'] },
        { from: 'package', package: '@tapjs/test', name: ['test', 'only', 'skip', 'todo'] },
      ] }],
      '@typescript-eslint/no-misused-promises': 'error',
    },
  },
  { files: ['bench/**', 'test/**', '.ci/**'], rules: { 'no-console': 'off' } },
  // Plain Node scripts (test runner, install patch): Node globals, and they report on the console.
  { files: ['**/*.mjs'], languageOptions: { globals: { process: 'readonly', console: 'readonly', URL: 'readonly' } }, rules: { 'no-console': 'off' } },
)
