/**
 * The delivery connection an accepted email is bound to, as the API sees it when it enqueues the email: its From
 * domain's binding, else its project's, else `default` (the worker's router decides the same way, and may fail
 * over; the fair share counts the binding). Used only to count each connection's fair share apart
 * (`@mailroom/queues/send-lanes`); with one connection there is nothing to resolve and no resolver.
 *
 * @module
 */
import { connectionNamed, type SesConnection } from '@mailroom/mail/connections';
import { boundConnection } from '@mailroom/projects/queries/delivery-connections';
import type { DbOrTx } from '@mailroom/db/client';

/** How long (ms) a binding read from the database is reused (as the worker's router does). */
export const LANE_BINDING_TTL_MS = 5_000;

/**
 * The connection name of mail from `from` (an address) of project `projectId`. Never throws: a failed lookup
 * answers the last known binding, else `default`'s.
 */
export type LaneConnectionOf = (projectId: string, from: string) => Promise<string>;

/**
 * A cached {@link LaneConnectionOf} over `connections`, or `undefined` with a single connection (the fair share is
 * then counted exactly as without connections, at no cost).
 */
export function laneConnectionResolver(
  db: DbOrTx,
  connections: readonly SesConnection[],
): LaneConnectionOf | undefined {
  if (connections.length <= 1) return undefined;
  const cache = new Map<string, { name: string; at: number }>();
  return async (projectId, from) => {
    const domain = from
      .slice(from.lastIndexOf('@') + 1)
      .trim()
      .toLowerCase();
    const k = `${projectId}|${domain}`;
    const hit = cache.get(k);
    if (hit && Date.now() - hit.at < LANE_BINDING_TTL_MS) return hit.name;
    try {
      const name = connectionNamed(connections, await boundConnection(db, projectId, domain)).name;
      if (cache.size > 10_000) cache.clear();
      cache.set(k, { name, at: Date.now() });
      return name;
    } catch {
      return hit?.name ?? connections[0].name;
    }
  };
}
