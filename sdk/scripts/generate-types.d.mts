// Types of generate-types.mjs, for the drift test that imports it.
export const TYPES_FILE: string
export function typesSource(doc: Record<string, unknown>): Promise<string>
