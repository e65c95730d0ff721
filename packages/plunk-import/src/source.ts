/**
 * Reading a Plunk v2 database (its Prisma schema, `packages/db/prisma/schema.prisma` of the v2 monorepo): table
 * names are Prisma's `@@map` names (`projects`, `contacts`, …), columns keep Prisma's camelCase field names
 * (quoted), enums are Postgres enums (read as text). Every table is read in keyset batches over its primary key,
 * so memory holds one batch, whatever the table's size.
 *
 * @module
 */
import { Pool, types } from 'pg';

/**
 * Prisma's `DateTime` is `timestamp(3)` without time zone holding UTC; node-postgres would read it as local time.
 * This pool reads it as UTC (its own parsers: the process-wide ones stay as they are).
 */
const sourceTypes = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === (types.builtins.TIMESTAMP as number) && format !== 'binary'
      ? (value: string) => new Date(value.replace(' ', 'T') + 'Z')
      : types.getTypeParser(oid, format)) as typeof types.getTypeParser,
};

/** One keyset-paged read of a Plunk table. */
export interface PlunkQuery {
  /** Column list (`c.id, c.email, …`), aliases as the mapper reads them. */
  select: string;
  /** `FROM` clause with its joins. */
  from: string;
  /** Extra condition, ANDed with the keyset condition. */
  where?: string;
  /** The primary-key expressions, in order (a row-value comparison pages over them). */
  key: string[];
  /** Names of the key columns in the selected rows (same order as {@link key}). */
  keyFields: string[];
}

/** The Plunk v2 tables the importer needs (each must exist in the source database). */
export const PLUNK_TABLES = [
  'projects',
  'domains',
  'contacts',
  'templates',
  'segments',
  'segment_memberships',
  'campaigns',
  'emails',
  'workflows',
  'workflow_steps',
  'workflow_transitions',
  'events',
] as const;

const id = (alias: string): Pick<PlunkQuery, 'key' | 'keyFields'> => ({ key: [`${alias}.id`], keyFields: ['id'] });

/** The reads of each kind, in Plunk v2's column names. */
export const PLUNK_QUERIES = {
  projects: { select: 'p.id, p.name, p.public, p.secret, p.disabled, p."createdAt"', from: 'projects p', ...id('p') },
  domains: {
    select: 'd.id, d."projectId", d.domain, d."dkimTokens", d.verified, d."createdAt"',
    from: 'domains d',
    ...id('d'),
  },
  contacts: {
    select: 'c.id, c."projectId", c.email, c.data, c.subscribed, c."createdAt", c."updatedAt"',
    from: 'contacts c',
    ...id('c'),
  },
  templates: {
    select:
      't.id, t."projectId", t.name, t.description, t.subject, t.body, t."from", t."fromName", t."replyTo", t.type::text AS type, ' +
      't."createdAt", t."updatedAt"',
    from: 'templates t',
    ...id('t'),
  },
  segments: {
    select:
      's.id, s."projectId", s.name, s.description, s.type::text AS type, s.condition, s."trackMembership", s."createdAt", s."updatedAt"',
    from: 'segments s',
    ...id('s'),
  },
  segmentMembers: {
    // Current members of STATIC segments, and of tracked DYNAMIC ones (so the worker's first pass here finds
    // them in and records no spurious entry events); an untracked DYNAMIC segment's members are its filter's answer.
    select: 'm."segmentId", m."contactId", c."createdAt" AS "contactCreatedAt", m."enteredAt"',
    from: 'segment_memberships m JOIN segments s ON s.id = m."segmentId" JOIN contacts c ON c.id = m."contactId"',
    where: `(s.type = 'STATIC' OR s."trackMembership") AND m."exitedAt" IS NULL`,
    key: ['m."segmentId"', 'm."contactId"'],
    keyFields: ['segmentId', 'contactId'],
  },
  campaigns: {
    select:
      'k.id, k."projectId", k.name, k.description, k.status::text AS status, k.subject, k.body, k."from", k."fromName", k."replyTo", ' +
      'k."audienceType"::text AS "audienceType", k."audienceCondition", k."segmentId", k."scheduledFor", k."totalRecipients", ' +
      'k."unsubscribedCount", k."sentAt", k."createdAt", k."updatedAt"',
    from: 'campaigns k',
    ...id('k'),
  },
  campaignEmails: {
    select:
      'e.id, e."projectId", e."campaignId", e."contactId", c."createdAt" AS "contactCreatedAt", c.email AS "toEmail", e."toName", ' +
      'e."from", e."fromName", e."replyTo", e.subject, e."messageId", e.status::text AS status, e."sentAt", e."deliveredAt", ' +
      'e."openedAt", e."clickedAt", e.opens, e.clicks, e.error, e."createdAt", e."updatedAt"',
    from: 'emails e JOIN contacts c ON c.id = e."contactId"',
    where: `e."sourceType" = 'CAMPAIGN' AND e."campaignId" IS NOT NULL`,
    ...id('e'),
  },
  workflows: {
    select:
      'w.id, w."projectId", w.name, w.description, w.enabled, w."triggerType"::text AS "triggerType", w."triggerConfig", ' +
      'w."allowReentry", w."createdAt", w."updatedAt"',
    from: 'workflows w',
    ...id('w'),
  },
  steps: {
    select:
      's.id, s."workflowId", s.type::text AS type, s.name, s.config, s."templateId", s."createdAt", s."updatedAt"',
    from: 'workflow_steps s',
    ...id('s'),
  },
  transitions: {
    select:
      't.id, t."fromStepId", t."toStepId", t.condition, t."waitOutcome"::text AS "waitOutcome", t.priority, t."createdAt", ' +
      'f.type::text AS "fromType", f."workflowId"',
    from: 'workflow_transitions t JOIN workflow_steps f ON f.id = t."fromStepId"',
    ...id('t'),
  },
  events: {
    select: 'e.id, e."projectId", e.name, e.data, e."contactId", c."createdAt" AS "contactCreatedAt", e."createdAt"',
    from: 'events e LEFT JOIN contacts c ON c.id = e."contactId"',
    ...id('e'),
  },
} satisfies Record<string, PlunkQuery>;

/** A connection to the Plunk database being imported (read only: the importer never writes to it). */
export class PlunkSource {
  private readonly pool: Pool;

  /** @param url - the Plunk database's connection string (`postgres://…`). */
  constructor(url: string) {
    this.pool = new Pool({
      connectionString: url,
      max: 1,
      application_name: 'mailroom-plunk-import',
      types: sourceTypes,
    });
  }

  /**
   * Checks that the source looks like a Plunk v2 database.
   *
   * @throws Error naming the missing tables.
   */
  async check(): Promise<void> {
    const { rows } = await this.pool.query<{ name: string }>(
      `SELECT t AS name FROM unnest($1::text[]) t WHERE to_regclass(format('public.%I', t)) IS NULL`,
      [PLUNK_TABLES],
    );
    if (rows.length > 0) {
      throw new Error(
        `not a Plunk v2 database: missing table(s) ${rows.map((r) => r.name).join(', ')} (see Plunk's packages/db/prisma/schema.prisma)`,
      );
    }
  }

  /** Counts the rows a query would read (for progress). */
  async count(q: PlunkQuery): Promise<number> {
    const { rows } = await this.pool.query<{ n: string }>(
      `SELECT count(*) AS n FROM ${q.from}${q.where ? ` WHERE ${q.where}` : ''}`,
    );
    return Number(rows[0].n);
  }

  /**
   * Reads every row of `q` in batches of `size`, in key order.
   *
   * @yields arrays of at most `size` rows (node-postgres types: timestamps as Date, JSON parsed).
   */
  async *batches<T extends Record<string, unknown>>(q: PlunkQuery, size: number): AsyncGenerator<T[]> {
    let after: unknown[] | undefined;
    const keyList = `(${q.key.join(', ')})`;
    for (;;) {
      const conditions = [
        q.where,
        after ? `${keyList} > (${q.key.map((_, i) => `$${i + 2}`).join(', ')})` : undefined,
      ].filter(Boolean);
      const text =
        `SELECT ${q.select} FROM ${q.from}${conditions.length ? ` WHERE ${conditions.map((c) => `(${c})`).join(' AND ')}` : ''} ` +
        `ORDER BY ${q.key.join(', ')} LIMIT $1`;
      const { rows } = await this.pool.query<T>(text, [size, ...(after ?? [])]);
      if (rows.length === 0) return;
      yield rows;
      if (rows.length < size) return;
      const last = rows[rows.length - 1];
      after = q.keyFields.map((f) => last[f]);
    }
  }

  /** Ends the connection. */
  async close(): Promise<void> {
    await this.pool.end();
  }
}
