// Lists that are both a promise of their first page and an async iterator over every item of
// every page, following `next_cursor`. A page that cannot be followed ends the walk with an error
// rather than repeat pages for ever or stop early unnoticed.

import { PayrailDecodeError } from './errors.js';
import type { Page } from './models.js';

/**
 * A list: `await` it for its first page, or iterate it (`for await`) for every item across pages,
 * newest first. Nothing is fetched until one of the two is asked for; each iteration walks from
 * the first page again, fetching a page only once the previous one is consumed.
 *
 * ```ts
 * const first = await payrail.transactions.list({ status: 'paid', limit: 100 }); // one page
 * for await (const transaction of payrail.transactions.list({ status: 'paid', limit: 100 })) {
 *   // every page
 * }
 * ```
 */
export interface ListPromise<T, C = number> extends Promise<Page<T, C>>, AsyncIterable<T> {
  /** Every page, in order, as it is fetched: for work done page by page. */
  pages(): AsyncIterable<Page<T, C>>;
}

/** Fetches one page, with `cursor` as `starting_after` when given. */
export type FetchPage<T, C> = (cursor: C | undefined) => Promise<Page<T, C>>;

/** @internal */
export class List<T, C> implements ListPromise<T, C> {
  readonly #fetch: FetchPage<T, C>;
  #first: Promise<Page<T, C>> | undefined;

  constructor(fetch: FetchPage<T, C>) {
    this.#fetch = fetch;
  }

  get [Symbol.toStringTag](): string {
    return 'ListPromise';
  }

  #firstPage(): Promise<Page<T, C>> {
    this.#first ??= this.#fetch(undefined);
    return this.#first;
  }

  then<R1 = Page<T, C>, R2 = never>(
    onfulfilled?: ((value: Page<T, C>) => R1 | PromiseLike<R1>) | null,
    onrejected?: ((reason: unknown) => R2 | PromiseLike<R2>) | null,
  ): Promise<R1 | R2> {
    return this.#firstPage().then(onfulfilled, onrejected);
  }

  catch<R = never>(onrejected?: ((reason: unknown) => R | PromiseLike<R>) | null): Promise<Page<T, C> | R> {
    return this.#firstPage().catch(onrejected);
  }

  finally(onfinally?: (() => void) | null): Promise<Page<T, C>> {
    return this.#firstPage().finally(onfinally);
  }

  async *pages(): AsyncGenerator<Page<T, C>, void, undefined> {
    const seen = new Set<string>();
    let cursor: C | undefined;
    for (;;) {
      const page = await this.#fetch(cursor);
      if (!page.has_more) {
        yield page;
        return;
      }
      // A further page must be named by a cursor that moves on, after a page with rows; a page
      // that names none is refused whole, as its rows would be the last ones seen.
      const next = page.next_cursor;
      const problem =
        next === null
          ? 'has_more without a next_cursor'
          : page.data.length === 0
            ? 'has_more on an empty page'
            : seen.has(String(next))
              ? `the same next_cursor twice (${String(next)})`
              : undefined;
      if (problem !== undefined) {
        throw new PayrailDecodeError(200, `a list page that cannot be followed: ${problem}`);
      }
      seen.add(String(next));
      cursor = next as C;
      yield page;
    }
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T, void, undefined> {
    for await (const page of this.pages()) {
      yield* page.data;
    }
  }
}
