/**
 * A project's open and click tracking mode (`tracking_mode`: `ALL`, `MARKETING_ONLY`, `NONE`), read and set by
 * operators. How an email's tracking follows from it is the rule of `@mailroom/db`'s `queries/tracking-rule`.
 *
 * @module
 */
import { eq } from 'drizzle-orm';
import type { DbOrTx } from '@mailroom/db/client';
import { projects, type TrackingMode } from '@mailroom/db/schema';

/** Project `projectId`'s tracking mode, or undefined when there is no such project. */
export async function getTrackingMode(db: DbOrTx, projectId: string): Promise<TrackingMode | undefined> {
  const rows = await db.select({ mode: projects.trackingMode }).from(projects).where(eq(projects.id, projectId));
  return rows[0]?.mode;
}

/**
 * Sets project `projectId`'s tracking mode.
 * @returns whether the project exists.
 */
export async function setTrackingMode(db: DbOrTx, projectId: string, mode: TrackingMode): Promise<boolean> {
  const rows = await db
    .update(projects)
    .set({ trackingMode: mode, updatedAt: new Date() })
    .where(eq(projects.id, projectId))
    .returning({ id: projects.id });
  return rows.length > 0;
}
