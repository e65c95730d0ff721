/**
 * Open and click tracking of an email, decided when it is accepted: its own override (a send's, template's or
 * campaign's `tracking`), else its project's `tracking_mode` (`ALL`, `MARKETING_ONLY`: marketing mail only,
 * `NONE`). Stored on the email (`emails.tracking`), so every attempt goes through the same SES configuration set.
 * The rule, shared by every statement that writes emails; a project's mode is read and set by `@mailroom/projects`'s
 * `queries/tracking`.
 *
 * @module
 */
import { sql, type SQL } from 'drizzle-orm';
import { type TrackingMode } from '../schema';

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
