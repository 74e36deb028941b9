/** Types of test/backend-files.mjs (the test runner's plain ES module). */
export function backendBound(root?: string): (file: string) => boolean
export function testFiles(paths: readonly string[], root?: string): string[]
