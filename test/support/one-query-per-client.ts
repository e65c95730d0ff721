/**
 * Fails a test file in which a query was given to a pg client still busy with another one (in practice: a
 * transaction's connection handed to `Promise.all`). pg 8 queues such a query and prints a `DeprecationWarning`
 * once per process (pg 9 will refuse it), which is easy to miss in a CI log and does not say where; this wraps
 * `Client.prototype.query` of the test file's own `pg` module, records the caller's stack when the (connected)
 * client is still running or queueing another query, and fails the file in `afterAll` with those stacks.
 *
 * Loaded for every test file (`setupFilesAfterEnv` in `jest.config.js`).
 */
import { Client } from 'pg';

const concurrent: string[] = [];
type Queued = Client & { _activeQuery?: unknown; _queryQueue?: unknown[]; _connected?: boolean; pipeline?: boolean };
const query = Object.getOwnPropertyDescriptor(Client.prototype, 'query')!.value as (
  this: Client,
  ...args: unknown[]
) => unknown;

/** The error's stack without this file's frame (drizzle's async layers often hide the caller: the test names it). */
function callers(error: Error): string {
  return (error.stack ?? '')
    .split('\n')
    .filter((line) => !line.includes('one-query-per-client'))
    .join('\n');
}

beforeAll(() => {
  Client.prototype.query = function (this: Queued, ...args: unknown[]) {
    const busy = this._connected && (this._activeQuery != null || (this._queryQueue?.length ?? 0) > 0);
    if (busy && !this.pipeline)
      concurrent.push(
        callers(new Error(`a query given to a busy pg client in "${expect.getState().currentTestName ?? 'a hook'}"`)),
      );
    return query.apply(this, args);
  } as Client['query'];
});

afterAll(() => {
  Client.prototype.query = query as Client['query'];
  if (concurrent.length > 0)
    throw new Error(`queries given to a pg client still busy with another:\n${concurrent.join('\n\n')}`);
});
