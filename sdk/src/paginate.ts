// The API's lists (contract 2.10) answer `{ data, pagination: { count, after } }`; the next page is
// asked for with `?after=<pagination.after>` until it is null. A Paginated is an async iterator
// of the items across pages, fetched one page at a time as the loop asks for more.

export interface Page<T> {
  data: T[]
  pagination: { count: number; after: string | null }
}

export class Paginated<T> implements AsyncIterable<T> {
  private readonly fetchPage: (after: string | undefined) => Promise<Page<T>>
  private readonly start: string | undefined

  constructor(fetchPage: (after: string | undefined) => Promise<Page<T>>, start?: string) {
    this.fetchPage = fetchPage
    this.start = start
  }

  /** The first page only (its `pagination.after` is the cursor of the next). */
  first(): Promise<Page<T>> {
    return this.fetchPage(this.start)
  }

  /** Every page, in order. */
  async *pages(): AsyncGenerator<Page<T>, void, undefined> {
    let after = this.start
    for (;;) {
      const page = await this.fetchPage(after)
      yield page
      if (!page.pagination.after || page.data.length === 0) return
      after = page.pagination.after
    }
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for await (const page of this.pages()) yield* page.data
  }

  /** Every item of every page in one array (for short lists). */
  async all(): Promise<T[]> {
    const out: T[] = []
    for await (const item of this) out.push(item)
    return out
  }
}
