import { boolean, index, jsonb, pgTable, text, timestamp, uuid, check } from 'drizzle-orm/pg-core';
import { sql } from 'drizzle-orm';
import { bytea, createdAt, idColumn, updatedAt } from './columns';

/** Per-project overrides of the campaign guardrails (see `projects.guardrails`). */
export interface ProjectGuardrails {
  /** Outcomes (deliveries plus bounces) a campaign needs before its rates are judged. */
  minSample?: number;
  /** Hard bounces per outcome above which the campaign pauses (fraction). */
  maxHardBounceRate?: number;
  /** Complaints per outcome (deliveries plus bounces) above which the campaign pauses (fraction). */
  maxComplaintRate?: number;
}

/**
 * Per-project overrides of the retention settings (see `projects.retention`), each in days: a field left out takes
 * the service default (`RETENTION_*_DAYS`).
 */
export interface ProjectRetention {
  emailContentDays?: number;
  emailDays?: number;
  eventDays?: number;
  webhookDays?: number;
  workflowExecutionDays?: number;
  /** Received messages (`inbound_emails`). */
  inboundDays?: number;
}

/**
 * Open and click tracking of a project's mail (Plunk's values): `ALL` mail, `MARKETING_ONLY` (campaigns, MARKETING
 * templates and marketing workflow mail), or `NONE`. A send's, template's or campaign's own `tracking` overrides it.
 */
export const TRACKING_MODES = ['ALL', 'MARKETING_ONLY', 'NONE'] as const;
export type TrackingMode = (typeof TRACKING_MODES)[number];

/** Key modes: `live` keys send through SES; `test` keys (`sk_test_…`, `pk_test_…`) deliver to a sink. */
export const API_KEY_MODES = ['live', 'test'] as const;
export type ApiKeyMode = (typeof API_KEY_MODES)[number];

/**
 * Key scopes: `full` keys work on every route of their kind; `sending` keys (secret only) send and nothing else
 * (`POST /v1/send` and the SMTP relay), optionally only from their `allowed_domains`.
 */
export const API_KEY_SCOPES = ['full', 'sending'] as const;
export type ApiKeyScope = (typeof API_KEY_SCOPES)[number];

/** A tenant. Every other row belongs to one project; a disabled project can neither call the API nor send. */
export const projects = pgTable(
  'projects',
  {
    id: idColumn(),
    name: text('name').notNull(),
    disabled: boolean('disabled').notNull().default(false),
    /** HMAC-SHA256 key of the project's unsubscribe tokens (32 random bytes, never shown). */
    signingKey: bytea('signing_key')
      .notNull()
      .default(sql`decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex')`),
    /** Standard Webhooks secret (`whsec_…`) signing the project's workflow WEBHOOK calls; made on first use. */
    workflowWebhookSecret: text('workflow_webhook_secret'),
    /**
     * Deliverability guardrails of this project's campaigns, each field overriding the service default when set:
     * `{ minSample?: number, maxHardBounceRate?: number, maxComplaintRate?: number }` (rates are fractions, 0.02 = 2%).
     */
    guardrails: jsonb('guardrails').$type<ProjectGuardrails>(),
    /** Retention overrides (days per kind of record), set by the operator; null: the service defaults apply. */
    retention: jsonb('retention').$type<ProjectRetention>(),
    /**
     * The delivery connection (`SES_CONNECTIONS` name) of this project's domains that have none of their own; null:
     * the first (`default`). Set by the operator.
     */
    sesConnection: text('ses_connection'),
    /** Open and click tracking of the project's mail ({@link TRACKING_MODES}); `ALL` is the behaviour before the setting. */
    trackingMode: text('tracking_mode').notNull().$type<TrackingMode>().default('ALL'),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (_t) => [
    check(
      'projects_tracking_mode_check',
      sql.raw(`tracking_mode in (${TRACKING_MODES.map((m) => `'${m}'`).join(', ')})`),
    ),
  ],
);

/**
 * API keys, stored as SHA-256 hashes. `expiresAt` is set when a key is rotated out (grace period); a key is
 * valid while it is null or in the future, and it has not been revoked. `revokedAt` records when an operator
 * revoked the key (a leaked key): it ends the key at once, whatever its expiry, and stays as the audit trail.
 */
export const apiKeys = pgTable(
  'api_keys',
  {
    id: idColumn(),
    projectId: uuid('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    kind: text('kind').notNull().$type<'secret' | 'public'>(),
    keyHash: text('key_hash').notNull().unique(),
    keyPrefix: text('key_prefix').notNull(),
    /** `test` keys create test data: validated, stored and rendered as live, delivered to a sink (never SES). */
    mode: text('mode').notNull().$type<ApiKeyMode>().default('live'),
    /** `full` (every key made before scopes, and every rotated pair) or `sending` (send only). */
    scope: text('scope').notNull().$type<ApiKeyScope>().default('full'),
    /**
     * For a `sending` key: the sending domains its mail may come from (lower-case; each covers its subdomains, as a
     * verified domain does). Null: any verified domain of the project.
     */
    allowedDomains: text('allowed_domains').array(),
    createdAt: createdAt(),
    expiresAt: timestamp('expires_at', { withTimezone: true, mode: 'date' }),
    revokedAt: timestamp('revoked_at', { withTimezone: true, mode: 'date' }),
  },
  (t) => [
    index('api_keys_project_idx').on(t.projectId),
    check('api_keys_kind_check', sql`${t.kind} in ('secret', 'public')`),
    check('api_keys_mode_check', sql`${t.mode} in ('live', 'test')`),
    check(
      'api_keys_scope_check',
      sql`${t.scope} in ('full', 'sending') and (${t.scope} = 'sending' or ${t.allowedDomains} is null)`,
    ),
  ],
);
