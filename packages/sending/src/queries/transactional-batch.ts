/**
 * The writes of several accepted `POST /v1/send` requests in one statement (group commit): what
 * {@link writeTransactional} does for one request (sender check, contact upsert, suppression lookup, email rows,
 * their first timeline entries, the `email.suppressed` webhook deliveries; the suppression rule of `suppression-rule.ts`), for all of them, in one round trip,
 * one transaction, one WAL flush and one firing of each statement trigger. The API folds concurrent sends into
 * such batches (`@mailroom/platform/batcher`); measured with `npm run bench -- api` ("Postgres CPU ms/req").
 *
 * Each request has exactly the effect it would have had alone: a request whose sender no verified domain covers
 * writes nothing (and the others still write); requests of several projects may share a batch. Two requests for
 * one contact (one project, one address) may not, since one statement cannot update a row twice:
 * {@link writeTransactionalBatch} refuses such a batch before writing, and its caller writes them one by one.
 *
 * A request may also carry files (stored by the statement) and an idempotency key (claimed by the statement, with
 * its answer known beforehand: the SMTP relay's Message-ID, `./idempotency`): a request whose key is held by an
 * earlier one writes nothing and is answered `keyHeld`. Two requests claiming one key may not share a batch either.
 *
 * @module
 */
import { trackingSql } from '@mailroom/db/queries/tracking-rule';
import { sql, type SQL } from 'drizzle-orm';
import { newId } from '@mailroom/platform/ids';
import type { DbOrTx } from '@mailroom/db/client';
import { fromSql, mergeInputs, type ContactSqlRow, type ContactUpsert } from '@mailroom/contacts/queries/contacts';
import { splitPatch } from '@mailroom/db/queries/data-patch';
import { executeTemplate, namedTemplate, type NamedTemplate } from '@mailroom/db/queries/named';
import {
  emailStatusSql,
  firstEventDataSql,
  type TransactionalContent,
  type TransactionalRecipient,
  type TransactionalWrite,
} from './transactional';
import {
  suppressionCauseSql,
  suppressionDataSql,
  suppressionReasonSql,
  type SuppressionCause,
} from '@mailroom/db/queries/suppression-rule';
import { endpointWants } from '@mailroom/db/queries/webhooks';
import { BATCH_SUBSCRIPTION_EVENTS, BATCH_UPSERT } from '@mailroom/db/queries/batch-upsert';
import { IDEMPOTENCY_TTL_MS } from './idempotency';

/** One request's write, as {@link writeTransactional}'s arguments. */
export interface TransactionalRequest {
  projectId: string;
  contacts: ContactUpsert[];
  recipients: TransactionalRecipient[];
  content: TransactionalContent;
  webhookTimestamp: string;
  /** As {@link writeTransactional}'s `senderDomains`: when given, the request writes only if one is verified. */
  senderDomains?: string[];
  /**
   * Files to store with the emails, in the same statement (their ids, made by the caller, are in
   * `content.attachmentIds`); written only if the request is (its sender allowed).
   */
  files?: InlineFile[];
  /**
   * An idempotency key claimed by the statement itself (`./idempotency`): the request writes only if the key is
   * free (or past its 24 h), and the key's row, with `statusCode` and `response` as its stored answer, commits with
   * the request's rows. A key held by a request still running makes the statement wait for its commit (then this
   * request writes nothing: `keyHeld`) or its rollback (then this one claims it). The key is claimed only when the
   * sender check passed.
   */
  idempotency?: StatementIdempotency;
}

/** An idempotency key claimed in the write statement (see {@link TransactionalRequest}.idempotency). */
export interface StatementIdempotency {
  key: string;
  /** What the key's later uses are compared with (a hash of the request). */
  fingerprint: string;
  statusCode: number;
  /** The answer stored with the key: known before the write (say, the ids of the emails it makes). */
  response: unknown;
}

/** A file stored by the write statement itself (an `attachments` row). */
export interface InlineFile {
  /** The row's id (uuid v7, made by the caller). */
  id: string;
  filename: string;
  contentType: string;
  content: Buffer;
  /** Content-ID without angle brackets (an inline image, `cid:` in the HTML), or none. */
  contentId?: string | null;
  /** Content-Disposition (null: `inline` with a content id, else `attachment`). */
  disposition?: 'inline' | 'attachment' | null;
}

/** Thrown (before any write) for a batch in which two requests upsert one contact, or claim one idempotency key. */
export class SharedContactInBatch extends Error {
  constructor(what = 'one contact') {
    super(`two requests of the batch are for ${what}`);
  }
}

type Row = ContactSqlRow & {
  req: number | null;
  suppression: SuppressionCause | null;
  deliveries: { id: string; generation: number }[] | null;
  held?: number[];
};

const ph = (key: string) => sql.placeholder(key);

/** Empty arrays, one per column name: the array parameters of a batch statement, filled element by element. */
const columns = <K extends string>(...names: K[]) =>
  Object.fromEntries(names.map((n) => [n, [] as unknown[]])) as Record<K, unknown[]>;

/** The statement's text for each shape (idempotency keys, files, subscription changes), built once per process. */
const statements = new Map<string, NamedTemplate>();

/**
 * The batch statement of one shape: its values are the array placeholders `q.*` (one element per request), `c.*`
 * (per contact), `r.*` (per recipient), `k.*` (per idempotency key) and `f.*` (per file) of
 * {@link writeTransactionalBatch}; built on first use, then reused for every batch of that shape.
 */
function batchStatement(keyed: boolean, files: boolean, subscriptions: boolean): NamedTemplate {
  const shape = `${+keyed}${+files}${+subscriptions}`;
  const template = statements.get(shape) ?? namedTemplate(batchSql(keyed, files, subscriptions));
  statements.set(shape, template);
  return template;
}

function batchSql(keyed: boolean, files: boolean, subscriptions: boolean): SQL {
  return sql`
    with reqs as (
      select * from unnest(${ph('q.req')}::int[], ${ph('q.project')}::uuid[], ${ph('q.template')}::uuid[], ${ph('q.marketing')}::boolean[], ${ph('q.tracking')}::boolean[],
        ${ph('q.templateVersion')}::int[], ${ph('q.fromEmail')}::text[], ${ph('q.fromName')}::text[], ${ph('q.replyTo')}::text[], ${ph('q.subject')}::text[], ${ph('q.body')}::text[],
        ${ph('q.format')}::text[], ${ph('q.variables')}::jsonb[], ${ph('q.headers')}::jsonb[], ${ph('q.attachments')}::text[], ${ph('q.test')}::boolean[],
        ${ph('q.timestamp')}::text[], ${ph('q.senders')}::jsonb[], ${ph('q.scheduledAt')}::timestamptz[], ${ph('q.tags')}::jsonb[])
        as t(req, project_id, template_id, marketing, tracking, template_version, from_email, from_name, reply_to, subject, body, body_format, variables, headers, attachment_ids, test, webhook_ts, senders, scheduled_at, tags)
    ),
    ${keyed ? sql`checked` : sql`allowed`} as (
      select q.* from reqs q
      where q.senders is null or exists (
        select 1 from domains d
        where d.project_id = q.project_id and d.verified and lower(d.domain) in (select jsonb_array_elements_text(q.senders)))
    ),${
      keyed
        ? sql`
    keys as (
      select * from unnest(${ph('k.req')}::int[], ${ph('k.key')}::text[], ${ph('k.fingerprint')}::text[], ${ph('k.status')}::int[], ${ph('k.response')}::json[])
        as k(req, key, fingerprint, status_code, response)
    ),
    claims as (
      insert into idempotency_keys (project_id, key, fingerprint, status_code, response, created_at)
      select q.project_id, k.key, k.fingerprint, k.status_code, k.response, now()
      from keys k join checked q on q.req = k.req
      on conflict (project_id, key) do update set
        fingerprint = excluded.fingerprint, status_code = excluded.status_code, response = excluded.response, created_at = now()
      where idempotency_keys.created_at < now() - make_interval(secs => ${IDEMPOTENCY_TTL_MS / 1000})
      returning project_id, key
    ),
    taken as (
      select k.req from keys k join checked q on q.req = k.req
      where not exists (select 1 from claims c where c.project_id = q.project_id and c.key = k.key)
    ),
    allowed as (
      select q.* from checked q where q.req not in (select req from taken)
    ),`
        : sql``
    }
    input as (
      select i.* from unnest(${ph('c.req')}::int[], ${ph('c.id')}::uuid[], ${ph('c.project')}::uuid[], ${ph('c.email')}::text[], ${ph('c.key')}::text[],
        ${ph('c.subscribed')}::boolean[], ${ph('c.stated')}::boolean[], ${ph('c.patch')}::jsonb[], ${ph('c.removed')}::jsonb[], ${ph('c.test')}::boolean[])
        as i(req, id, project_id, email, email_key, subscribed, stated, patch, removed, test)
      where i.req in (select req from allowed)
    ),
    ${sql.raw(BATCH_UPSERT)},${
      files
        ? sql`
    files as (
      insert into attachments (id, project_id, filename, content_type, size, content, content_id, disposition)
      select f.id, q.project_id, f.filename, f.content_type, octet_length(f.content), f.content, f.content_id, f.disposition
      from unnest(${ph('f.req')}::int[], ${ph('f.id')}::uuid[], ${ph('f.filename')}::text[], ${ph('f.contentType')}::text[], ${ph('f.content')}::bytea[],
        ${ph('f.contentId')}::text[], ${ph('f.disposition')}::text[])
        as f(req, id, filename, content_type, content, content_id, disposition)
      join allowed q on q.req = f.req
    ),`
        : sql``
    }${subscriptions ? sql.raw(`\n    ${BATCH_SUBSCRIPTION_EVENTS},`) : sql``}
    rcpt as (
      select r.*, q.project_id from unnest(${ph('r.req')}::int[], ${ph('r.id')}::uuid[], ${ph('r.key')}::text[], ${ph('r.email')}::text[], ${ph('r.name')}::text[])
        as r(req, id, email_key, to_email, to_name)
      join allowed q on q.req = r.req
    ),
    held as (
      select r.id, r.project_id, r.email_key,
        ${suppressionCauseSql({ projectId: sql`r.project_id`, emailKey: sql`r.email_key`, marketing: sql`q.marketing`, subscribed: sql`u.subscribed` })} as cause
      from rcpt r
      join reqs q on q.req = r.req
      join upserted u on u.project_id = r.project_id and u.email_key = r.email_key
    ),
    em as (
      insert into emails (id, project_id, contact_id, template_id, template_version, source, marketing, tracking, to_email, to_name, from_email, from_name,
        reply_to, subject, body, body_format, variables, headers, attachment_ids, test, tags, status, error, scheduled_at)
      select r.id, q.project_id, u.id, q.template_id, q.template_version, 'transactional', q.marketing, ${trackingSql(sql`q.project_id`, sql`q.tracking`, sql`q.marketing`)}, r.to_email, r.to_name,
        q.from_email, q.from_name, q.reply_to, q.subject, q.body, q.body_format, q.variables, q.headers, q.attachment_ids::uuid[], q.test, q.tags,
        ${emailStatusSql(sql`h.cause`, sql`q.scheduled_at`)},
        'suppressed: ' || ${suppressionReasonSql(sql`h.cause`)}, q.scheduled_at
      from rcpt r
      join reqs q on q.req = r.req
      join upserted u on u.project_id = q.project_id and u.email_key = r.email_key
      join held h on h.id = r.id
      returning id, project_id, contact_id, to_email, from_email, status, scheduled_at
    ),
    timeline as (
      insert into email_events (id, email_id, project_id, type, data)
      select mailroom_uuid_v7(clock_timestamp()), em.id, em.project_id, em.status, ${firstEventDataSql(sql`h.cause`, sql`em`)}
      from em join held h on h.id = em.id
    ),
    wh as (
      insert into webhook_deliveries (id, project_id, endpoint_id, event_type, payload)
      select mailroom_uuid_v7(clock_timestamp()), em.project_id, w.id, 'email.suppressed',
        jsonb_build_object('type', 'email.suppressed', 'timestamp', q.webhook_ts, 'data',
          jsonb_build_object('emailId', em.id, 'contactId', em.contact_id, 'campaignId', null, 'messageId', null,
            'to', em.to_email, 'from', em.from_email, 'status', 'suppressed', 'tags', coalesce(q.tags, '[]'::jsonb))
          || ${suppressionDataSql(sql`h.cause`)}
          || case when q.test then '{"test":true}'::jsonb else '{}'::jsonb end)
      from em
      join held h on h.id = em.id
      join rcpt r on r.id = em.id
      join reqs q on q.req = r.req
      join webhook_endpoints w on w.project_id = em.project_id and ${endpointWants(sql`'email.suppressed'`)}
      where em.status = 'suppressed'
      returning id, generation, (payload->'data'->>'emailId')::uuid as email_id
    )
    ${keyed ? sql`, written as (` : sql``}
    select u.*, i.req, h.cause as suppression,
      (select jsonb_agg(jsonb_build_object('id', wh.id, 'generation', wh.generation)) from wh join rcpt r on r.id = wh.email_id where r.req = i.req) as deliveries
    from upserted u
    join input i on i.project_id = u.project_id and i.email_key = u.email_key
    left join held h on h.project_id = u.project_id and h.email_key = u.email_key
    ${
      keyed
        ? sql`)
    -- At least one row, which names the requests whose key was taken (none of their rows were written).
    select w.*, (select coalesce(array_agg(req), '{}') from taken) as held
    from (select 1) as one left join written w on true`
        : sql``
    }`;
}

/** What {@link writeTransactionalBatch} answers for each request. */
export interface BatchWrite extends TransactionalWrite {
  /** The request's idempotency key was held by an earlier request (committed, within 24 h): nothing was written. */
  keyHeld?: true;
}

/**
 * Writes the requests in one statement (see the module notes).
 *
 * @returns one {@link TransactionalWrite} per request, in the requests' order.
 * @throws {@link SharedContactInBatch} (nothing written); what Postgres throws (then nothing of the batch is
 *   written: one statement).
 */
export async function writeTransactionalBatch(db: DbOrTx, requests: TransactionalRequest[]): Promise<BatchWrite[]> {
  // The statement's array parameters, one element per request (q), contact (c), recipient (r), key (k), file (f).
  const q = columns(
    'req',
    'project',
    'template',
    'templateVersion',
    'marketing',
    'tracking',
    'fromEmail',
    'fromName',
    'replyTo',
    'subject',
    'body',
    'format',
    'variables',
    'headers',
    'attachments',
    'test',
    'tags',
    'timestamp',
    'senders',
    'scheduledAt',
  );
  const c = columns('req', 'id', 'project', 'email', 'key', 'subscribed', 'stated', 'patch', 'removed', 'test');
  const r = columns('req', 'id', 'key', 'email', 'name');
  const k = columns('req', 'key', 'fingerprint', 'status', 'response');
  const f = columns('req', 'id', 'filename', 'contentType', 'content', 'contentId', 'disposition');
  const seen = new Set<string>();
  const seenKeys = new Set<string>();
  let mayChangeSubscription = false;
  requests.forEach((request, i) => {
    const ct = request.content;
    q.req.push(i);
    q.project.push(request.projectId);
    q.template.push(ct.templateId);
    q.templateVersion.push(ct.templateVersion ?? null);
    q.marketing.push(ct.marketing);
    q.tracking.push(ct.tracking);
    q.fromEmail.push(ct.fromEmail);
    q.fromName.push(ct.fromName);
    q.replyTo.push(ct.replyTo);
    q.subject.push(ct.subject);
    q.body.push(ct.body);
    q.format.push(ct.bodyFormat);
    q.variables.push(JSON.stringify(ct.variables));
    q.headers.push(JSON.stringify(ct.headers));
    q.attachments.push(`{${ct.attachmentIds.join(',')}}`);
    q.test.push(ct.test);
    q.tags.push(ct.tags ? JSON.stringify(ct.tags) : null);
    q.timestamp.push(request.webhookTimestamp);
    q.senders.push(request.senderDomains ? JSON.stringify(request.senderDomains) : null);
    q.scheduledAt.push(ct.scheduledAt ? ct.scheduledAt.toISOString() : null);
    for (const row of mergeInputs(request.contacts)) {
      const contactKey = `${request.projectId} ${row.key}`;
      if (seen.has(contactKey)) throw new SharedContactInBatch();
      seen.add(contactKey);
      if (row.subscribed !== undefined || row.defaultSubscribed) mayChangeSubscription = true;
      const { set, removed } = splitPatch(row.data);
      c.req.push(i);
      c.id.push(newId());
      c.project.push(request.projectId);
      c.email.push(row.email);
      c.key.push(row.key);
      c.subscribed.push(row.subscribed ?? row.defaultSubscribed);
      c.stated.push(row.subscribed !== undefined);
      c.patch.push(JSON.stringify(set));
      c.removed.push(JSON.stringify(removed));
      c.test.push(ct.test);
    }
    if (request.idempotency) {
      const idem = request.idempotency;
      // One statement cannot claim one key twice; apart, the second waits for the first and replays it.
      if (seenKeys.has(`${request.projectId} ${idem.key}`)) throw new SharedContactInBatch('one idempotency key');
      seenKeys.add(`${request.projectId} ${idem.key}`);
      k.req.push(i);
      k.key.push(idem.key);
      k.fingerprint.push(idem.fingerprint);
      k.status.push(idem.statusCode);
      k.response.push(JSON.stringify(idem.response ?? null));
    }
    for (const file of request.files ?? []) {
      f.req.push(i);
      f.id.push(file.id);
      f.filename.push(file.filename);
      f.contentType.push(file.contentType);
      f.content.push(file.content);
      f.contentId.push(file.contentId ?? null);
      f.disposition.push(file.disposition ?? null);
    }
    for (const rc of request.recipients) {
      r.req.push(i);
      r.id.push(rc.id);
      r.key.push(rc.emailKey);
      r.email.push(rc.email);
      r.name.push(rc.name);
    }
  });
  const keyed = k.req.length > 0;
  const values: Record<string, unknown> = {};
  for (const [group, columns] of Object.entries({ q, c, r, k, f }))
    for (const [column, list] of Object.entries(columns)) values[`${group}.${column}`] = list;
  const result = await executeTemplate<Row>(db, batchStatement(keyed, f.req.length > 0, mayChangeSubscription), values);
  const out: BatchWrite[] = requests.map((request) => ({
    contacts: new Map(),
    suppressed: new Map(),
    deliveries: [],
    senderRefused: request.recipients.length > 0,
  }));
  for (const req of result.rows[0]?.held ?? []) {
    out[req].senderRefused = false;
    out[req].keyHeld = true;
  }
  for (const row of result.rows) {
    const req = row.req;
    if (req === null) continue;
    const w = out[req];
    w.senderRefused = false;
    w.contacts.set(row.email_key, fromSql(row));
    if (row.suppression) w.suppressed.set(row.email_key, row.suppression);
    if (w.deliveries.length === 0 && row.deliveries)
      w.deliveries = row.deliveries.map((d) => ({
        id: d.id,
        projectId: requests[req].projectId,
        generation: d.generation,
      }));
  }
  return out;
}
