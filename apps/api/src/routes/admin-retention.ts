/**
 * A project's data retention, set by the operator: `GET/PUT /admin/projects/{id}/retention` and the CLI's
 * `project retention`. Each setting overrides the service default (`RETENTION_*_DAYS`) for that project; the
 * worker's `retention` maintenance task applies them (docs/architecture.md#maintenance-and-reconciliation).
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import {
  effectiveRetention,
  RETENTION_FIELDS,
  RETENTION_MAX_DAYS,
  RETENTION_MIN_DAYS,
  validRetentionDays,
  type RetentionSettings,
} from '@mailroom/retention/retention-settings';
import { getProjectRetention, updateProjectRetention } from '@mailroom/retention/queries/retention';
import { route } from '../http/route';
import type { AppDeps } from '../http/context';
import { IdParams, Nullable } from './common';
import { overrideOps } from './project-overrides';

const RULE = `must be a whole number of days from ${RETENTION_MIN_DAYS} to ${RETENTION_MAX_DAYS}, or null for the default`;

const DESCRIPTIONS: Readonly<Record<keyof RetentionSettings, string>> = {
  emailContentDays: 'content (body, variables, headers, attachments) of final emails (days)',
  emailDays: 'metadata and timeline of non-campaign emails (days; a campaign keeps its emails while it exists)',
  eventDays: 'contact events (days)',
  webhookDays: 'finished webhook deliveries and their attempts (days)',
  workflowExecutionDays: 'finished workflow executions and their step runs, from when they finished (days)',
  inboundDays: 'received email (inbound_emails, with its raw message), from when it was received (days)',
};

const Values = (
  description: string,
  valueOf: (d: string) => ReturnType<typeof Type.Integer> | ReturnType<typeof Nullable>,
) => Type.Object(Object.fromEntries(RETENTION_FIELDS.map((f) => [f, valueOf(DESCRIPTIONS[f])])), { description });

const Days = (d: string) => Type.Integer({ minimum: RETENTION_MIN_DAYS, maximum: RETENTION_MAX_DAYS, description: d });

const ProjectRetentionView = Type.Object({
  projectId: Type.String(),
  overrides: Values("the project's own settings; null: the service default applies", (d) =>
    Nullable(Type.Integer({ description: d })),
  ),
  effective: Values("what the project's records are kept by", Days),
  defaults: Values(
    'the service defaults (RETENTION_EMAIL_CONTENT_DAYS, RETENTION_EMAIL_DAYS, RETENTION_EVENT_DAYS, RETENTION_WEBHOOK_DAYS, RETENTION_WORKFLOW_EXECUTION_DAYS, RETENTION_INBOUND_DAYS)',
    Days,
  ),
});

const RetentionBody = Type.Object(
  Object.fromEntries(
    RETENTION_FIELDS.map((f) => [
      f,
      Type.Optional(
        Nullable(Type.Integer({ minimum: RETENTION_MIN_DAYS, maximum: RETENTION_MAX_DAYS, description: RULE })),
      ),
    ]),
  ),
  { additionalProperties: false },
);

/** The operations shared by `/admin/projects/{id}/retention` and the CLI. */
export const retentionOps = overrideOps<RetentionSettings>({
  fields: RETENTION_FIELDS,
  noun: 'retention',
  valid: (_field, v) => validRetentionDays(v),
  rule: () => RULE,
  effective: effectiveRetention,
  load: getProjectRetention,
  store: updateProjectRetention,
});

/** The routes of this module. */
export function adminRetentionRoutes(deps: AppDeps) {
  const { db } = deps.database;
  const defaults = deps.config.retention;
  return [
    route({
      method: 'get',
      path: '/admin/projects/:id/retention',
      operationId: 'adminGetRetention',
      tag: 'Admin',
      summary: "A project's data retention: its own settings, the effective ones and the service defaults",
      auth: 'admin',
      params: IdParams,
      response: ProjectRetentionView,
      status: 200,
      errors: [400, 401, 403, 404, 429],
      handler: async ({ params }) => ({ data: await retentionOps.get(db, defaults, params.id) }),
    }),
    route({
      method: 'put',
      path: '/admin/projects/:id/retention',
      operationId: 'adminSetRetention',
      tag: 'Admin',
      summary: "Set a project's data retention (a field set to null goes back to the service default)",
      description:
        "Days each kind of record is kept; the worker's `retention` maintenance task (every 10 minutes) deletes or " +
        'expires older ones in batches. Fields left out keep their value; null clears a field.',
      auth: 'admin',
      params: IdParams,
      body: RetentionBody,
      response: ProjectRetentionView,
      status: 200,
      errors: [400, 401, 403, 404, 422, 429],
      handler: async ({ params, body, log }) => {
        const r = await retentionOps.set(db, defaults, params.id, body);
        log.info({ projectId: params.id, overrides: r.overrides }, 'project retention set');
        return { data: r };
      },
    }),
  ];
}
