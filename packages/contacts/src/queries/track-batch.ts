/**
 * `POST /v1/track` for several requests in one statement (group commit): the contacts of all of them upserted,
 * their subscription events and their events inserted, one round trip, one transaction, one WAL flush. The API
 * folds concurrent tracks into such batches (`@mailroom/platform/batcher`): under load Postgres, not the API, was
 * half of a track's CPU (`npm run bench -- api`, "Postgres CPU ms/req"), most of it per statement and per commit.
 *
 * Each item has exactly the effect it would have given alone ({@link trackEvent}: a batch of one), in the batch's order: the same
 * contact merge rules (docs/api/overview.md: shallow `data` merge, `null` removes a key, `subscribed` changes only when
 * stated, new contacts subscribed), the same `contact.subscribed` / `contact.unsubscribed` events, the same event row.
 * Items of several projects may share a batch; two items for one contact may not (one statement cannot update a row
 * twice): {@link trackEvents} refuses such a batch before writing anything, and its caller runs the items one by one
 * instead.
 *
 * @module
 */
import { normalizeEmail } from '@mailroom/platform/address';
import { newId, newIdAt } from '@mailroom/platform/ids';
import type { DbOrTx } from '@mailroom/db/client';
import { fromSql, mergeInputs, type ContactSqlRow, type TrackInput, type TrackResult } from './contacts';
import { splitPatch } from '@mailroom/db/queries/data-patch';
import { executeNamedText } from '@mailroom/db/queries/named';
import { BATCH_SUBSCRIPTION_EVENTS, BATCH_UPSERT } from '@mailroom/db/queries/batch-upsert';

/** One `/v1/track` of a batch. */
export interface TrackItem {
  projectId: string;
  input: TrackInput;
}

/** Thrown (before any write) for a batch with two items for one contact. */
export class DuplicateContactInBatch extends Error {
  constructor() {
    super('two items of the batch are for one contact');
  }
}

const TRACK_BATCH = `with input as (
    select * from unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::boolean[], $6::boolean[], $7::jsonb[], $8::jsonb[],
      $9::uuid[], $10::text[], $11::jsonb[], $12::timestamptz[], $13::boolean[])
      as t(id, project_id, email, email_key, subscribed, stated, patch, removed, event_id, name, event_data, created_at, test)
  ),
  ${BATCH_UPSERT},
  ${BATCH_SUBSCRIPTION_EVENTS},
  ev as (
    insert into events (id, project_id, contact_id, name, data, created_at, test)
    select i.event_id, i.project_id, u.id, i.name, i.event_data, i.created_at, i.test
    from input i join upserted u on u.project_id = i.project_id and u.email_key = i.email_key
    returning id
  )
  select u.*, i.event_id from upserted u join input i on i.project_id = u.project_id and i.email_key = u.email_key
`;

const NAME = 'mr_track_batch_v1';

/**
 * Records the events of `items` in one statement (see the module notes).
 *
 * @returns one result per item, in the items' order.
 * @throws {@link DuplicateContactInBatch} (nothing written) when two items are for one contact; what Postgres
 *   throws otherwise (then nothing of the batch is written either: one statement).
 */
export async function trackEvents(db: DbOrTx, items: TrackItem[]): Promise<TrackResult[]> {
  const rows = items.map((item) => {
    const [row] = mergeInputs([
      {
        email: normalizeEmail(item.input.email),
        subscribed: item.input.subscribed,
        defaultSubscribed: true,
        data: item.input.contactData,
      },
    ]);
    const now = Date.now();
    return { item, row, eventId: newIdAt(now), createdAt: new Date(now), contactKey: `${item.projectId} ${row.key}` };
  });
  if (new Set(rows.map((r) => r.contactKey)).size !== rows.length) throw new DuplicateContactInBatch();
  const columns: unknown[][] = Array.from({ length: 13 }, () => []);
  for (const { item, row, eventId, createdAt } of rows) {
    const { set, removed } = splitPatch(row.data);
    const values = [
      newId(),
      item.projectId,
      row.email,
      row.key,
      row.subscribed ?? row.defaultSubscribed,
      row.subscribed !== undefined,
      JSON.stringify(set),
      JSON.stringify(removed),
      eventId,
      item.input.name,
      JSON.stringify(item.input.eventData),
      createdAt.toISOString(),
      item.input.test ?? false,
    ];
    values.forEach((v, i) => columns[i].push(v));
  }
  const result = await executeNamedText<ContactSqlRow & { project_id: string; event_id: string }>(
    db,
    NAME,
    TRACK_BATCH,
    columns,
  );
  const byContact = new Map(result.rows.map((r) => [`${r.project_id} ${r.email_key}`, r]));
  return rows.map(({ contactKey, eventId, createdAt }) => {
    const found = byContact.get(contactKey);
    if (!found) throw new Error(`track batch: no row for ${contactKey}`);
    return { contact: fromSql(found), eventId, createdAt };
  });
}

/**
 * Records one custom event: upserts the contact (new contacts default to subscribed) and inserts the event, in one
 * statement: {@link trackEvents} for a batch of one (one round trip; the contact-count and event-name counters
 * follow by trigger). Concurrent calls for one new address create one contact and one event each. Runs in the
 * caller's transaction when `db` is one.
 *
 * @throws what Postgres throws (then nothing is written).
 */
export async function trackEvent(db: DbOrTx, projectId: string, input: TrackInput): Promise<TrackResult> {
  const [result] = await trackEvents(db, [{ projectId, input }]);
  return result;
}
