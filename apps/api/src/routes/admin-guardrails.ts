/**
 * A project's campaign guardrails, set by the operator: `GET/PUT /admin/projects/{id}/guardrails` and the CLI's
 * `project guardrails`. Each setting overrides the service default (`GUARDRAIL_*`) for that project's campaigns.
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import { effectiveGuardrails, GUARDRAIL_FIELDS, validGuardrailValue } from '@mailroom/campaigns/guardrails';
import { type Guardrails } from '@mailroom/audiences/guardrail-defaults';
import { getProjectGuardrails, updateProjectGuardrails } from '@mailroom/campaigns/queries/guardrails';
import { route } from '../http/route';
import type { AppDeps } from '../http/context';
import { IdParams, Nullable } from './common';
import { overrideOps } from './project-overrides';

const RULES = {
  minSample: 'must be a whole number of at least 1 (outcomes), or null for the default',
  maxHardBounceRate: 'must be a fraction from 0 to 1 (0.02 = 2%), or null for the default',
  maxComplaintRate: 'must be a fraction from 0 to 1 (0.0005 = 0.05%), or null for the default',
} as const;

const Values = (description: string) =>
  Type.Object(
    {
      minSample: Type.Integer({
        minimum: 1,
        description: 'outcomes (deliveries plus hard and soft bounces) before a campaign is judged',
      }),
      maxHardBounceRate: Type.Number({
        minimum: 0,
        maximum: 1,
        description: 'hard bounces per outcome above which a campaign pauses (fraction)',
      }),
      maxComplaintRate: Type.Number({
        minimum: 0,
        maximum: 1,
        description: 'complaints per outcome above which a campaign pauses (fraction)',
      }),
    },
    { description },
  );

const ProjectGuardrailsView = Type.Object({
  projectId: Type.String(),
  overrides: Type.Object(
    {
      minSample: Nullable(Type.Integer()),
      maxHardBounceRate: Nullable(Type.Number()),
      maxComplaintRate: Nullable(Type.Number()),
    },
    { description: "the project's own settings; null: the service default applies" },
  ),
  effective: Values("what the project's campaigns are judged by"),
  defaults: Values(
    'the service defaults (GUARDRAIL_MIN_SAMPLE, GUARDRAIL_MAX_HARD_BOUNCE_RATE, GUARDRAIL_MAX_COMPLAINT_RATE)',
  ),
});

const GuardrailsBody = Type.Object(
  {
    minSample: Type.Optional(Nullable(Type.Integer({ minimum: 1, maximum: 10_000_000, description: RULES.minSample }))),
    maxHardBounceRate: Type.Optional(
      Nullable(Type.Number({ minimum: 0, maximum: 1, description: RULES.maxHardBounceRate })),
    ),
    maxComplaintRate: Type.Optional(
      Nullable(Type.Number({ minimum: 0, maximum: 1, description: RULES.maxComplaintRate })),
    ),
  },
  { additionalProperties: false },
);

/** The operations shared by `/admin/projects/{id}/guardrails` and the CLI. */
export const guardrailOps = overrideOps<Guardrails>({
  fields: GUARDRAIL_FIELDS,
  noun: 'guardrail',
  valid: validGuardrailValue,
  rule: (field) => RULES[field],
  effective: effectiveGuardrails,
  load: getProjectGuardrails,
  store: (db, projectId, patch) => updateProjectGuardrails(db, projectId, patch),
});

/** The routes of this module. */
export function adminGuardrailRoutes(deps: AppDeps) {
  const { db } = deps.database;
  const defaults = deps.config.guardrails;
  return [
    route({
      method: 'get',
      path: '/admin/projects/:id/guardrails',
      operationId: 'adminGetGuardrails',
      tag: 'Admin',
      summary: "A project's campaign guardrails: its own settings, the effective ones and the service defaults",
      auth: 'admin',
      params: IdParams,
      response: ProjectGuardrailsView,
      status: 200,
      errors: [400, 401, 403, 404, 429],
      handler: async ({ params }) => ({ data: await guardrailOps.get(db, defaults, params.id) }),
    }),
    route({
      method: 'put',
      path: '/admin/projects/:id/guardrails',
      operationId: 'adminSetGuardrails',
      tag: 'Admin',
      summary: "Set a project's campaign guardrails (a field set to null goes back to the service default)",
      description:
        'A SENDING campaign pauses (PAUSED, reason `bounce_rate` or `complaint_rate`) once it has `minSample` outcomes ' +
        '(deliveries plus hard and soft bounces) and its hard bounces or complaints per outcome are above the threshold. ' +
        'Fields left out keep their value; null clears a field. Applies to the next SES event of every running campaign.',
      auth: 'admin',
      params: IdParams,
      body: GuardrailsBody,
      response: ProjectGuardrailsView,
      status: 200,
      errors: [400, 401, 403, 404, 422, 429],
      handler: async ({ params, body, log }) => {
        const r = await guardrailOps.set(db, defaults, params.id, body);
        log.info({ projectId: params.id, overrides: r.overrides }, 'project guardrails set');
        return { data: r };
      },
    }),
  ];
}
