/**
 * The bounce and complaint guardrail of campaigns (docs/architecture.md#guardrails): a project's overrides of the
 * service thresholds (`projects.guardrails`, set by the operator) and the check that pauses a SENDING campaign from the
 * SES feedback path.
 *
 * Re-arm after a resume: resuming a guardrail pause stores the campaign's outcome totals as `baseline` in the
 * `resumed` timeline entry (`resumeCampaign`); the guardrail then judges only the outcomes since, after a new
 * minimum sample. So the bounces that paused a campaign do not pause it again at once; it pauses again only if
 * what comes back after the resume crosses a threshold on its own.
 *
 * @module
 */
import { sql } from 'drizzle-orm';
import { getProjectOverrides, updateProjectOverrides } from '@mailroom/projects/queries/project-overrides';
import {
  effectiveGuardrails,
  GUARDRAIL_FIELDS,
  judgeCampaign,
  outcomesSince,
  type GuardrailOverrides,
  type GuardrailVerdict,
  type OutcomeCounts,
} from '../guardrails';
import { type Guardrails } from '@mailroom/audiences/guardrail-defaults';
import { type WebhookDeliveryRef } from '@mailroom/db/queries/webhook-delivery-ref';
import type { DbOrTx } from '@mailroom/db/client';
import type { ProjectGuardrails } from '@mailroom/db/schema';
import { pauseCampaign } from './campaign-pause';
import { campaignOutcomesJson } from '@mailroom/db/queries/reputation-counts';

/**
 * A project's stored overrides.
 *
 * @returns the overrides (`{}` when none are set), or `undefined` when the project does not exist.
 */
export async function getProjectGuardrails(db: DbOrTx, projectId: string): Promise<ProjectGuardrails | undefined> {
  return getProjectOverrides<ProjectGuardrails>(db, projectId, 'guardrails');
}

/**
 * Changes a project's overrides in one statement: a field given a number is set, a field given `null` is cleared
 * (back to the service default), a field left out keeps its value. Values must already be valid
 * (`validGuardrailValue`).
 *
 * @returns the overrides after the change (`{}` when none are left), or `undefined` when the project does not exist.
 */
export async function updateProjectGuardrails(
  db: DbOrTx,
  projectId: string,
  patch: GuardrailOverrides,
): Promise<ProjectGuardrails | undefined> {
  const given = Object.fromEntries(GUARDRAIL_FIELDS.map((f) => [f, patch[f]]));
  return updateProjectOverrides<ProjectGuardrails>(db, projectId, 'guardrails', given);
}

/** What {@link enforceCampaignGuardrail} did. */
export interface GuardrailCheck {
  /** The verdict, when the campaign was SENDING (absent otherwise: nothing to judge). */
  verdict?: GuardrailVerdict;
  /** Whether this call paused the campaign. */
  paused: boolean;
  /** `campaign.paused` webhook deliveries to announce after the commit. */
  deliveries: WebhookDeliveryRef[];
}

/**
 * Judges a SENDING campaign on its outcomes so far (its `reputation_counts` summed over hours and sending domains,
 * less the baseline of its last resume from a guardrail pause) against its project's effective guardrails, and
 * pauses it (`bounce_rate` or `complaint_rate`, with the figures) when a rate is over. Call in the transaction
 * that counted the SES event, after the count: the pause, its timeline entry and its `campaign.paused` webhook
 * deliveries commit with the event.
 *
 * Cost: one indexed read of the campaign's rows (hours × sending domains), only for an email of a SENDING
 * campaign; the campaign row is locked only when it pauses.
 *
 * @param defaults - the service defaults (`config.guardrails`).
 */
export async function enforceCampaignGuardrail(
  tx: DbOrTx,
  campaignId: string,
  defaults: Readonly<Guardrails>,
): Promise<GuardrailCheck> {
  const rows = await tx.execute<{
    guardrails: GuardrailOverrides | null;
    totals: OutcomeCounts;
    baseline: Partial<OutcomeCounts> | null;
  }>(sql`
    select p.guardrails, ${campaignOutcomesJson(sql`c.id`)} as totals,
      (select e.data->'baseline' from campaign_events e
        where e.campaign_id = c.id and e.type = 'resumed' and e.data->'baseline' is not null
        order by e.id desc limit 1) as baseline
    from campaigns c join projects p on p.id = c.project_id
    where c.id = ${campaignId}::uuid and c.status = 'SENDING'
  `);
  const row = rows.rows[0];
  if (!row) return { paused: false, deliveries: [] };
  const guardrails = effectiveGuardrails(defaults, row.guardrails);
  const verdict = judgeCampaign(outcomesSince(row.totals, row.baseline), guardrails);
  if (!verdict.pause) return { verdict, paused: false, deliveries: [] };
  const details = { ...verdict.details, sinceResume: row.baseline !== null };
  const move = await pauseCampaign(tx, campaignId, verdict.reason, details);
  return { verdict, paused: move.moved, deliveries: move.deliveries };
}
