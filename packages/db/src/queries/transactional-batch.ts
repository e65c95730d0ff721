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
 * @module
 */
import { sql } from 'drizzle-orm';
import { newId } from '@mailroom/platform/ids';
import type { DbOrTx } from '../client';
import { fromSql, mergeInputs, type ContactSqlRow, type ContactUpsert } from './contacts';
import { splitPatch } from './data-patch';
import { executeNamed } from './named';
import { type TransactionalContent, type TransactionalRecipient, type TransactionalWrite } from './transactional';
import { suppressionCauseSql, suppressionDataSql, suppressionReasonSql, type SuppressionCause } from './suppression-rule';
import { endpointWants } from './webhooks';
import { BATCH_SUBSCRIPTION_EVENTS, BATCH_UPSERT } from './batch-upsert';

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
}

/** A file stored by the write statement itself (an `attachments` row). */
export interface InlineFile {
  /** The row's id (uuid v7, made by the caller). */
  id: string;
  filename: string;
  contentType: string;
  content: Buffer;
}

/** Thrown (before any write) for a batch in which two requests upsert one contact. */
export class SharedContactInBatch extends Error {
  constructor() {
    super('two requests of the batch are for one contact');
  }
}

const param = (values: unknown[]) => sql.param(values);

type Row = ContactSqlRow & { req: number; suppression: SuppressionCause | null; deliveries: { id: string; generation: number }[] | null };

/**
 * Writes the requests in one statement (see the module notes).
 *
 * @returns one {@link TransactionalWrite} per request, in the requests' order.
 * @throws {@link SharedContactInBatch} (nothing written); what Postgres throws (then nothing of the batch is
 *   written: one statement).
 */
export async function writeTransactionalBatch(db: DbOrTx, requests: TransactionalRequest[]): Promise<TransactionalWrite[]> {
  const q = { req: [] as number[], project: [] as string[], template: [] as (string | null)[], marketing: [] as boolean[], fromEmail: [] as string[], fromName: [] as (string | null)[], replyTo: [] as (string | null)[], subject: [] as string[], body: [] as string[], format: [] as string[], variables: [] as string[], headers: [] as string[], attachments: [] as string[], test: [] as boolean[], tags: [] as (string | null)[], timestamp: [] as string[], senders: [] as (string | null)[] };
  const c = { req: [] as number[], id: [] as string[], project: [] as string[], email: [] as string[], key: [] as string[], subscribed: [] as boolean[], stated: [] as boolean[], patch: [] as string[], removed: [] as string[], test: [] as boolean[] };
  const r = { req: [] as number[], id: [] as string[], key: [] as string[], email: [] as string[], name: [] as (string | null)[] };
  const f = { req: [] as number[], id: [] as string[], filename: [] as string[], contentType: [] as string[], content: [] as Buffer[] };
  const seen = new Set<string>();
  let mayChangeSubscription = false;
  requests.forEach((request, i) => {
    const ct = request.content;
    q.req.push(i);
    q.project.push(request.projectId);
    q.template.push(ct.templateId);
    q.marketing.push(ct.marketing);
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
    for (const file of request.files ?? []) {
      f.req.push(i);
      f.id.push(file.id);
      f.filename.push(file.filename);
      f.contentType.push(file.contentType);
      f.content.push(file.content);
    }
    for (const rc of request.recipients) {
      r.req.push(i);
      r.id.push(rc.id);
      r.key.push(rc.emailKey);
      r.email.push(rc.email);
      r.name.push(rc.name);
    }
  });
  const result = await executeNamed<Row>(db, sql`
    with reqs as (
      select * from unnest(${param(q.req)}::int[], ${param(q.project)}::uuid[], ${param(q.template)}::uuid[], ${param(q.marketing)}::boolean[],
        ${param(q.fromEmail)}::text[], ${param(q.fromName)}::text[], ${param(q.replyTo)}::text[], ${param(q.subject)}::text[], ${param(q.body)}::text[],
        ${param(q.format)}::text[], ${param(q.variables)}::jsonb[], ${param(q.headers)}::jsonb[], ${param(q.attachments)}::text[], ${param(q.test)}::boolean[],
        ${param(q.timestamp)}::text[], ${param(q.senders)}::jsonb[], ${param(q.tags)}::jsonb[])
        as t(req, project_id, template_id, marketing, from_email, from_name, reply_to, subject, body, body_format, variables, headers, attachment_ids, test, webhook_ts, senders, tags)
    ),
    allowed as (
      select q.* from reqs q
      where q.senders is null or exists (
        select 1 from domains d
        where d.project_id = q.project_id and d.verified and lower(d.domain) in (select jsonb_array_elements_text(q.senders)))
    ),
    input as (
      select i.* from unnest(${param(c.req)}::int[], ${param(c.id)}::uuid[], ${param(c.project)}::uuid[], ${param(c.email)}::text[], ${param(c.key)}::text[],
        ${param(c.subscribed)}::boolean[], ${param(c.stated)}::boolean[], ${param(c.patch)}::jsonb[], ${param(c.removed)}::jsonb[], ${param(c.test)}::boolean[])
        as i(req, id, project_id, email, email_key, subscribed, stated, patch, removed, test)
      where i.req in (select req from allowed)
    ),
    ${sql.raw(BATCH_UPSERT)},${f.req.length > 0 ? sql`
    files as (
      insert into attachments (id, project_id, filename, content_type, size, content)
      select f.id, q.project_id, f.filename, f.content_type, octet_length(f.content), f.content
      from unnest(${param(f.req)}::int[], ${param(f.id)}::uuid[], ${param(f.filename)}::text[], ${param(f.contentType)}::text[], ${param(f.content)}::bytea[])
        as f(req, id, filename, content_type, content)
      join allowed q on q.req = f.req
    ),` : sql``}${mayChangeSubscription ? sql.raw(`\n    ${BATCH_SUBSCRIPTION_EVENTS},`) : sql``}
    rcpt as (
      select r.*, q.project_id from unnest(${param(r.req)}::int[], ${param(r.id)}::uuid[], ${param(r.key)}::text[], ${param(r.email)}::text[], ${param(r.name)}::text[])
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
      insert into emails (id, project_id, contact_id, template_id, source, marketing, to_email, to_name, from_email, from_name,
        reply_to, subject, body, body_format, variables, headers, attachment_ids, test, tags, status, error)
      select r.id, q.project_id, u.id, q.template_id, 'transactional', q.marketing, r.to_email, r.to_name,
        q.from_email, q.from_name, q.reply_to, q.subject, q.body, q.body_format, q.variables, q.headers, q.attachment_ids::uuid[], q.test, q.tags,
        case when h.cause is null then 'queued' else 'suppressed' end,
        'suppressed: ' || ${suppressionReasonSql(sql`h.cause`)}
      from rcpt r
      join reqs q on q.req = r.req
      join upserted u on u.project_id = q.project_id and u.email_key = r.email_key
      join held h on h.id = r.id
      returning id, project_id, contact_id, to_email, from_email, status
    ),
    timeline as (
      insert into email_events (id, email_id, project_id, type, data)
      select mailroom_uuid_v7(clock_timestamp()), em.id, em.project_id, em.status, ${suppressionDataSql(sql`h.cause`)}
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
    select u.*, i.req, h.cause as suppression,
      (select jsonb_agg(jsonb_build_object('id', wh.id, 'generation', wh.generation)) from wh join rcpt r on r.id = wh.email_id where r.req = i.req) as deliveries
    from upserted u
    join input i on i.project_id = u.project_id and i.email_key = u.email_key
    left join held h on h.project_id = u.project_id and h.email_key = u.email_key
  `);
  const out: TransactionalWrite[] = requests.map((request) => ({
    contacts: new Map(),
    suppressed: new Map(),
    deliveries: [],
    senderRefused: request.recipients.length > 0,
  }));
  for (const row of result.rows) {
    const w = out[row.req];
    w.senderRefused = false;
    w.contacts.set(row.email_key, fromSql(row));
    if (row.suppression) w.suppressed.set(row.email_key, row.suppression);
    if (w.deliveries.length === 0 && row.deliveries) w.deliveries = row.deliveries.map((d) => ({ id: d.id, projectId: requests[row.req].projectId, generation: d.generation }));
  }
  return out;
}
