import { boolean, check, index, jsonb, pgTable, text, timestamp, uniqueIndex, uuid } from 'drizzle-orm/pg-core';
import { sql } from 'drizzle-orm';
import { createdAt, idColumn } from './columns';
import { projects } from './projects';
import type { DomainRecord } from './domain-record';

/** Verification states of a sending domain. */
export const DOMAIN_STATUSES = ['pending', 'verified', 'failed'] as const;
export type DomainStatus = (typeof DOMAIN_STATUSES)[number];

/**
 * A sending domain. A domain belongs to at most one project; `from` addresses must be on a verified one.
 * `status` is the identity's state (pending → verified or failed); `verified` is derived from it.
 */
export const domains = pgTable(
  'domains',
  {
    id: idColumn(),
    projectId: uuid('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    domain: text('domain').notNull(),
    /** `status = 'verified'`, kept by Postgres (a generated column): what the sender check reads. */
    verified: boolean('verified')
      .notNull()
      .generatedAlwaysAs(sql`status = 'verified'`),
    verifiedAt: timestamp('verified_at', { withTimezone: true, mode: 'date' }),
    status: text('status').notNull().$type<DomainStatus>().default('pending'),
    /** Easy DKIM tokens: `<token>._domainkey.<domain>` CNAME `<token>.dkim.amazonses.com`. */
    dkimTokens: text('dkim_tokens')
      .array()
      .notNull()
      .default(sql`'{}'::text[]`),
    /** The custom MAIL FROM domain (`mail.<domain>`). */
    mailFromDomain: text('mail_from_domain'),
    records: jsonb('records').$type<DomainRecord[]>().notNull().default([]),
    checkedAt: timestamp('checked_at', { withTimezone: true, mode: 'date' }),
    failedAt: timestamp('failed_at', { withTimezone: true, mode: 'date' }),
    failureReason: text('failure_reason'),
    /**
     * Mail to this domain is received (Amazon SES receiving): its DNS records include the MX record to publish, and
     * messages SES receives for it are stored for the project (`inbound_emails`).
     */
    inboundEnabled: boolean('inbound_enabled').notNull().default(false),
    /**
     * The delivery connection (`SES_CONNECTIONS` name) this domain's mail goes through; null: its project's, else
     * the first (`default`).
     */
    sesConnection: text('ses_connection'),
    /**
     * The custom open/click tracking (redirect) domain of this sending domain's mail, a subdomain of it (a CNAME to
     * SES's regional tracking endpoint, listed in `records`); null: SES's shared tracking domain.
     */
    trackingDomain: text('tracking_domain'),
    /**
     * When the tracking domain's CNAME was found and the SES configuration sets that redirect through it were made;
     * until then (and while null) mail keeps SES's shared tracking domain.
     */
    trackingReadyAt: timestamp('tracking_ready_at', { withTimezone: true, mode: 'date' }),
    /** The delivery connection whose SES holds those configuration sets (links in its mail use the domain). */
    trackingConnection: text('tracking_connection'),
    createdAt: createdAt(),
  },
  (t) => [
    uniqueIndex('domains_domain_idx').on(t.domain),
    index('domains_project_idx').on(t.projectId, t.id),
    // The worker's refresh: pending domains, least recently checked first.
    index('domains_pending_idx')
      .on(t.checkedAt)
      .where(sql`${t.status} = 'pending'`),
    // The worker's refresh: tracking domains not yet ready.
    index('domains_tracking_pending_idx')
      .on(t.checkedAt)
      .where(sql`${t.trackingDomain} is not null and ${t.trackingReadyAt} is null`),
    check('domains_status_check', sql.raw(`status in (${DOMAIN_STATUSES.map((s) => `'${s}'`).join(', ')})`)),
  ],
);
