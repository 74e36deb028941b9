// A test whose service or binary is missing on this machine is skipped by name with a reason that
// starts with `missing:`. test/run.mjs lists every such skip at the end of the run, and fails the
// run when CI=true: CI installs everything, so a test skipped there for a missing part is a test
// that silently stopped running. A test that does not apply to a backend by design (one node, no
// Postgres to stop under PGlite) is skipped with its own reason, not this one.
export const MISSING = 'missing:'

/** The skip reason for a test that needs `what`, with how to get it. */
export function missing(what: string): string {
  return `${MISSING} ${what}`
}
