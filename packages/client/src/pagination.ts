/**
 * Keyset pagination: every list answers `data: { items, nextCursor, hasMore, total }` and takes the previous
 * page's `nextCursor` as `cursor`.
 *
 * @module
 */
import { MailroomError, type Envelope } from './errors';

/** The part of a list page the iterator reads. */
export interface Page<Item> {
  items: Item[];
  nextCursor: string | null;
  hasMore: boolean;
}

/**
 * Every item of a list, page after page, fetching the next page only when the previous one is used up.
 *
 * @param fetchPage - fetches one page for a cursor (`undefined` for the first page), e.g.
 *   `(cursor) => client.GET('/contacts', { params: { query: { limit: 100, cursor } } })`.
 * @throws {@link MailroomError} when a page answers an error status (after the client's own retries).
 * @example
 * for await (const contact of paginate((cursor) => client.GET('/contacts', { params: { query: { limit: 100, cursor } } }))) {
 *   console.log(contact.email);
 * }
 */
export async function* paginate<Item>(
  fetchPage: (
    cursor: string | undefined,
  ) => Promise<{ data?: Envelope<Page<Item>>; error?: unknown; response: Response }>,
): AsyncGenerator<Item, void, undefined> {
  let cursor: string | undefined;
  for (;;) {
    const result = await fetchPage(cursor);
    if (result.data === undefined || !result.response.ok) throw new MailroomError(result.response.status, result.error);
    const page = result.data.data;
    yield* page.items;
    if (!page.hasMore || page.nextCursor === null) return;
    cursor = page.nextCursor;
  }
}
