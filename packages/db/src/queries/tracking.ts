/**
 * Open and click tracking of an email, decided when it is accepted: its own override (a send's, template's or
 * campaign's `tracking`), else its project's `tracking_mode` (`ALL`, `MARKETING_ONLY`: marketing mail only,
 * `NONE`). Stored on the email (`emails.tracking`), so every attempt goes through the same SES configuration set.
 *
 * @module
 */
import { eq, sql, type SQL } from 'drizzle-orm';
import type { DbOrTx } from '../client';
import { projects, type TrackingMode } from '../schema';

/** Whether mail of a project in `mode` is tracked, `marketing` or not, without an override of its own. */
export function tracksByMode(mode: TrackingMode, marketing: boolean): boolean {
  return mode === 'ALL' || (mode === 'MARKETING_ONLY' && marketing);
}

/**
 * The SQL boolean of an email's tracking: `override` (an SQL boolean, null: none), else the mode of project
 * `projectId` for mail that is `marketing` (an SQL boolean); true for a project that does not exist.
 */
export function trackingSql(projectId: SQL, override: SQL, marketing: SQL): SQL {
  return sql`coalesce(${override}, (select case p.tracking_mode when 'ALL' then true when 'NONE' then false else ${marketing} end
    from projects p where p.id = ${projectId}), true)`;
}

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
