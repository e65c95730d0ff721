/**
 * Erasure of a contact (`DELETE /contacts/{id}`, the privacy delete): the contact goes with its events,
 * workflow executions and segment memberships (cascades), and its personal data is removed from every other row
 * that holds it, in one transaction.
 *
 * What stays, on purpose:
 * - The contact's **email rows**, scrubbed (`erased_at` set): address replaced by {@link ERASED_ADDRESS}, name,
 *   subject, rendered subject, content and timeline details cleared, the address cut out of `error`. Status,
 *   timestamps and counters stay, so campaign stats, send-quota windows and reputation figures do not move.
 * - **Suppressions** of the address: a suppression is the deliverability safeguard that keeps a bounced or
 *   complaining address from being mailed again (and the proof the complaint was honoured); erasing it would let
 *   a re-import mail the person again. It is removed only by `DELETE /suppressions/{email}`.
 *
 * @module
 */
import { sql, type SQL } from 'drizzle-orm';
import type { DbOrTx } from '@mailroom/db/client';

/** What an erased email's recipient address becomes (`to_email` is not null; `.invalid` is reserved, RFC 2606). */
export const ERASED_ADDRESS = 'erased@erased.invalid';

/** What {@link eraseContact} removed, by table (rows). */
export interface ErasureCounts {
  emailsScrubbed: number;
  emailsCancelled: number;
  webhookDeliveriesDeleted: number;
  importErrorsDeleted: number;
  idempotencyResponsesScrubbed: number;
  /** Messages the contact sent to the project's inbound domains (received mail), deleted with their raw bytes. */
  inboundEmailsDeleted: number;
}

/**
 * Erases a contact of a project, in one transaction. The contact row is locked first, so a concurrent `/v1/send`
 * either commits before (its email is cancelled and scrubbed here) or after (and creates a new contact).
 *
 * In order: queued emails are cancelled (with a `cancelled` timeline entry); the contact's emails are scrubbed and
 * their timeline details and test-sink messages removed; webhook deliveries (pending or finished) whose payload
 * names the contact's id or address (as a whole value) are deleted (a pending one's job then finds no row and
 * skips); import row errors naming the address are deleted; stored idempotent responses naming it are scrubbed
 * (the address becomes {@link ERASED_ADDRESS}, the id the nil UUID), so a retry still replays; then the contact itself (its events,
 * executions with their step runs, and segment memberships go by cascade, and the counters by trigger).
 *
 * Cost: the emails through `emails_contact_idx`; the project's webhook deliveries (bounded by
 * `RETENTION_WEBHOOK_DAYS`), import errors (at most 1,000 per import) and idempotency keys (24 h) are read whole,
 * which an erasure, being rare, can afford.
 *
 * @returns what was removed, or `undefined` when the contact does not exist.
 */
export async function eraseContact(db: DbOrTx, projectId: string, id: string): Promise<ErasureCounts | undefined> {
  return db.transaction(async (tx) => {
    const locked = await tx.execute<{ email: string; email_key: string }>(
      sql`select email, email_key from contacts where project_id = ${projectId}::uuid and id = ${id}::uuid for update`,
    );
    const contact = locked.rows[0];
    if (!contact) return undefined;
    const p = sql`${projectId}::uuid`;
    const key = contact.email_key.toLowerCase();
    const cancelled = await tx.execute(sql`
      with cancelled as (
        update emails set status = 'cancelled', error = 'contact deleted', updated_at = now()
        where project_id = ${p} and contact_id = ${id}::uuid and status in ('scheduled', 'queued')
        returning id
      )
      insert into email_events (id, email_id, project_id, type, data)
      select mailroom_uuid_v7(clock_timestamp()), c.id, ${p}, 'cancelled', '{"reason":"contact deleted"}'::jsonb from cancelled c
    `);
    const scrubbed = await tx.execute<{ id: string }>(sql`
      update emails set
        to_email = ${ERASED_ADDRESS}, to_name = null, subject = null, rendered_subject = null, body = null,
        variables = '{}'::jsonb, headers = '{}'::jsonb, attachment_ids = '{}'::uuid[],
        error = nullif(replace(replace(error, to_email, '[erased]'), ${contact.email}, '[erased]'), ''),
        content_expired_at = coalesce(content_expired_at, now()), erased_at = now(), updated_at = now()
      where project_id = ${p} and contact_id = ${id}::uuid
      returning id
    `);
    const emailIds = scrubbed.rows.map((r) => r.id);
    if (emailIds.length > 0) {
      const ids = sql`${sql.param(emailIds)}::uuid[]`;
      // Timeline entries of the contact's own emails keep their type and time; details that name the recipient
      // (SES bounce reports quote it inside longer texts) go.
      const quoted = sql`(strpos(lower(data::text), ${key}) > 0 or strpos(data::text, ${id}) > 0)`;
      await tx.execute(
        sql`update email_events set data = null where email_id = any(${ids}) and data is not null and ${quoted}`,
      );
      await tx.execute(sql`delete from test_messages where email_id = any(${ids})`);
    }
    // Project-wide rows are matched on the address as a whole (delimited by characters that cannot be part of an
    // address, in any case) or on the id, never as a substring: erasing ann@x.com must not touch the rows of
    // joann@x.com or ann@x.com.au.
    const pattern = addressPattern(key);
    const names = (doc: SQL) => sql`(${doc}::text ~* ${pattern} or strpos(${doc}::text, ${id}) > 0)`;
    const deliveries = await tx.execute(
      sql`delete from webhook_deliveries where project_id = ${p} and ${names(sql`payload`)}`,
    );
    const importErrors = await tx.execute(sql`
      delete from contact_import_errors x using contact_imports i
      where i.id = x.import_id and i.project_id = ${p} and (lower(x.email) = ${key} or ${names(sql`x.errors`)})
    `);
    // A stored idempotent response is scrubbed, not deleted: a retry with its key must still replay (deleting it
    // would run the request again and mail its other recipients twice).
    const responses = await tx.execute<{ key: string; response: string }>(
      sql`select key, response::text as response from idempotency_keys where project_id = ${p} and ${names(sql`response::jsonb`)} for update`,
    );
    for (const r of responses.rows) {
      const scrubbedResponse = scrubJson(JSON.parse(r.response), new RegExp(pattern, 'gi'), id);
      await tx.execute(
        sql`update idempotency_keys set response = ${JSON.stringify(scrubbedResponse)}::json where project_id = ${p} and key = ${r.key}`,
      );
    }
    // Mail the person sent us (inbound): linked to the contact, or from the address when it arrived unlinked.
    const inbound = await tx.execute(
      sql`delete from inbound_emails where project_id = ${p} and (contact_id = ${id}::uuid or lower(from_email) = ${key})`,
    );
    await tx.execute(sql`delete from contacts where project_id = ${p} and id = ${id}::uuid`);
    return {
      emailsScrubbed: emailIds.length,
      emailsCancelled: cancelled.rowCount ?? 0,
      webhookDeliveriesDeleted: deliveries.rowCount ?? 0,
      importErrorsDeleted: importErrors.rowCount ?? 0,
      idempotencyResponsesScrubbed: responses.rows.length,
      inboundEmailsDeleted: inbound.rowCount ?? 0,
    };
  });
}

/** The nil UUID: what an erased contact's id becomes inside stored responses. */
const NIL_UUID = '00000000-0000-0000-0000-000000000000';

/**
 * A regular expression (POSIX ARE and JavaScript alike) matching `address` as a whole: preceded by the start or a
 * character that cannot end an address's local part, followed by the end or a character that cannot continue its
 * domain (a final `.` ends a sentence, `.au` continues the domain).
 */
function addressPattern(address: string): string {
  const escaped = address.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return `(^|[^a-z0-9._%+-])${escaped}(?=\\.?([^a-z0-9_%+.-]|$))`;
}

/** A copy of a JSON value with the address (`pattern`, global) cut out of every string and the id replaced. */
function scrubJson(value: unknown, pattern: RegExp, id: string): unknown {
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') return v === id ? NIL_UUID : v.replace(pattern, `$1${ERASED_ADDRESS}`);
    if (Array.isArray(v)) return v.map(walk);
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x)]));
    return v;
  };
  return walk(value);
}

/** What an address, or its quoted local part, becomes in feedback that arrives for an erased email. */
export const ERASED_TEXT = '[erased]';

/** One character of an address as it may appear in text: as itself, or percent-encoded once or twice (any hex case). */
function encodedChar(ch: string): string {
  const literal = ch.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&');
  const bytes = [...Buffer.from(ch, 'utf8')].map((b) => b.toString(16).padStart(2, '0')).join('');
  const hex = bytes
    .match(/../g)!
    .map((h) => `%(?:25)?${h}`)
    .join('');
  return `(?:${literal}|${hex})`;
}

// Characters that quote a local part in bounce texts: "ann", 'ann', <ann>, (ann), [ann], `ann`.
const OPEN_QUOTES = '"\'<([`';
const CLOSE_QUOTES = '"\'>)]`';

/**
 * A function that cuts every mention of `addresses` out of a JSON value (every string, and every key: a click's
 * `linkTags` are the sender's own names): each address in any letter case, percent-encoded in part or whole, once
 * or twice (`ann%40x.com`, `ann%2540x.com`: a click's URL), and its local part where it stands quoted on its own
 * (`"ann"`, `<ann>`: bounce diagnostics quote it so). Each becomes {@link ERASED_TEXT}. It matches without word boundaries on purpose: it is run only on
 * feedback about an erased email, where cutting too much costs nothing and leaving the address would undo the
 * erasure.
 *
 * @param addresses - the addresses that named the erased contact (empty strings and duplicates are ignored).
 * @returns the scrubber: a copy of the value, never the value itself changed.
 */
export function addressScrubber(addresses: readonly string[]): <T>(value: T) => T {
  const unique = [...new Set(addresses.map((a) => a.trim().toLowerCase()).filter((a) => a.length > 0))];
  if (unique.length === 0) return (value) => value;
  // Longest first, so an address is cut whole before a shorter one inside it.
  unique.sort((a, b) => b.length - a.length);
  const whole = unique.map((a) => [...a].map(encodedChar).join(''));
  const locals = [
    ...new Set(unique.map((a) => a.slice(0, Math.max(0, a.lastIndexOf('@')))).filter((l) => l.length > 0)),
  ];
  const quoted = locals.map((l) => l.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&'));
  const wholePattern = new RegExp(whole.join('|'), 'gi');
  const open = OPEN_QUOTES.replace(/[\]\\^-]/g, '\\$&');
  const close = CLOSE_QUOTES.replace(/[\]\\^-]/g, '\\$&');
  const localPattern =
    quoted.length > 0 ? new RegExp(`([${open}])(?:${quoted.join('|')})(?=[${close}])`, 'gi') : undefined;
  const scrubText = (text: string) => {
    const cut = text.replace(wholePattern, ERASED_TEXT);
    return localPattern ? cut.replace(localPattern, `$1${ERASED_TEXT}`) : cut;
  };
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') return scrubText(v);
    if (Array.isArray(v)) return v.map(walk);
    if (v && typeof v === 'object')
      return Object.fromEntries(Object.entries(v).map(([k, x]) => [scrubText(k), walk(x)]));
    return v;
  };
  return <T>(value: T) => walk(value) as T;
}
