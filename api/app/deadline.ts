// A promise raced against a deadline, the timer cleared whichever wins.

/** `p`'s value, or `late` once `ms` have passed first. `p` itself runs on either way. */
export function orAfter<T, L>(p: Promise<T>, ms: number, late: L): Promise<T | L> {
  let timer: NodeJS.Timeout | undefined
  const deadline = new Promise<L>(resolve => { timer = setTimeout(resolve, ms, late) })
  return Promise.race([p, deadline]).finally(() => clearTimeout(timer))
}
