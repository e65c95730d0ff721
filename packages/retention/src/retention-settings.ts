/**
 * The retention settings as pure functions: their names, the valid values, and which apply to a project
 * (its overrides, `projects.retention`, over the service defaults, `RETENTION_*_DAYS`).
 *
 * @module
 */

/** Days each kind of record is kept. */
export interface RetentionSettings {
  /** Content of final emails: `body`, `variables`, `headers`, attachments (days). */
  emailContentDays: number;
  /** Email metadata and timeline of non-campaign emails (days; a campaign's emails stay while it exists). */
  emailDays: number;
  /** Contact events (days). */
  eventDays: number;
  /** Finished outbound webhook deliveries and their attempts (days). */
  webhookDays: number;
  /** Finished workflow executions and their step runs, from when they finished (days). */
  workflowExecutionDays: number;
  /** Received messages (`inbound_emails`, with their raw bytes), from when SES received them (days). */
  inboundDays: number;
}

/** The names of the settings, in the order they are shown. */
export const RETENTION_FIELDS = [
  'emailContentDays',
  'emailDays',
  'eventDays',
  'webhookDays',
  'workflowExecutionDays',
  'inboundDays',
] as const;
export type RetentionField = (typeof RETENTION_FIELDS)[number];

/** The environment variable of each setting's service default. */
export const RETENTION_ENV: Readonly<Record<RetentionField, string>> = Object.freeze({
  emailContentDays: 'RETENTION_EMAIL_CONTENT_DAYS',
  emailDays: 'RETENTION_EMAIL_DAYS',
  eventDays: 'RETENTION_EVENT_DAYS',
  webhookDays: 'RETENTION_WEBHOOK_DAYS',
  workflowExecutionDays: 'RETENTION_WORKFLOW_EXECUTION_DAYS',
  inboundDays: 'RETENTION_INBOUND_DAYS',
});

/** The defaults an operator would choose without thinking about it (days). */
export const RETENTION_DEFAULTS: Readonly<RetentionSettings> = Object.freeze({
  emailContentDays: 30,
  emailDays: 365,
  eventDays: 365,
  webhookDays: 30,
  workflowExecutionDays: 90,
  inboundDays: 30,
});

/** Bounds of every setting (days): at least a day, at most a hundred years. */
export const RETENTION_MIN_DAYS = 1;
export const RETENTION_MAX_DAYS = 36_500;

/** A project's overrides as stored: a field left out (or null) takes the service default. */
export type RetentionOverrides = { [K in RetentionField]?: number | null };

/** Whether `v` is a valid setting: a whole number of days from {@link RETENTION_MIN_DAYS} to {@link RETENTION_MAX_DAYS}. */
export function validRetentionDays(v: unknown): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v >= RETENTION_MIN_DAYS && v <= RETENTION_MAX_DAYS;
}

/**
 * The settings that apply to a project: each override that is set and valid, else the default. An invalid stored
 * value (a hand-edited row) falls back to the default rather than deleting anything early.
 */
export function effectiveRetention(
  defaults: Readonly<RetentionSettings>,
  overrides?: RetentionOverrides | null,
): RetentionSettings {
  const pick = (f: RetentionField): number => {
    const v = overrides?.[f];
    return validRetentionDays(v) ? v : defaults[f];
  };
  return {
    emailContentDays: pick('emailContentDays'),
    emailDays: pick('emailDays'),
    eventDays: pick('eventDays'),
    webhookDays: pick('webhookDays'),
    workflowExecutionDays: pick('workflowExecutionDays'),
    inboundDays: pick('inboundDays'),
  };
}
