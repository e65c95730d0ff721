/**
 * What a route handler returns. Its own module so that `route.ts` (which runs handlers) and `idempotency.ts`
 * (which stores and replays their results) can both import it without importing each other.
 *
 * @module
 */

/** What a handler returns: the `data` of the success envelope, and the status (default: the route's). */
export interface RouteResult {
  status?: number;
  data: unknown;
}
