/**
 * Topics (docs/guides/topics.md): a project's subscription topics, each contact's explicit choices, and the one SQL
 * rule "this contact receives mail of this topic" ({@link topicSubscribedSql}) that the campaign fan-out, a workflow's
 * SEND_EMAIL step, the worker's claim and the segment filter all embed.
 *
 * @module
 */
import { and, asc, eq, sql, type SQL } from 'drizzle-orm';
import type { DbOrTx } from '@mailroom/db/client';
import { keysetList } from '@mailroom/db/queries/keyset';
import { topics, type TopicDefault, type TopicVisibility } from '@mailroom/db/schema/topics';

export type TopicRow = typeof topics.$inferSelect;

/** The fields of a topic a create or update sets. */
export interface TopicInput {
  name: string;
  description?: string | null;
  defaultSubscription: TopicDefault;
  visibility?: TopicVisibility;
}

/**
 * SQL condition "the contact is subscribed to the topic": its explicit choice in `contact_topics`, else the topic's
 * default (`opt_out` = subscribed). A topic that is not the project's (deleted, or another tenant's) subscribes
 * nobody. Reads at most one indexed row of each table. The global `subscribed` flag is not part of it.
 *
 * @param projectId - SQL uuid of the project; @param contactId - SQL uuid of the contact; @param topicId - SQL uuid.
 */
export function topicSubscribedSql(projectId: SQL, contactId: SQL, topicId: SQL): SQL {
  return sql`coalesce(
    (select ct.subscribed from contact_topics ct where ct.contact_id = ${contactId} and ct.topic_id = ${topicId} and ct.project_id = ${projectId}),
    (select tp.default_subscription = 'opt_out' from topics tp where tp.id = ${topicId} and tp.project_id = ${projectId}),
    false)`;
}

/** Creates a topic. @throws the driver's unique violation (23505) when the name is taken in the project. */
export async function createTopic(db: DbOrTx, projectId: string, input: TopicInput): Promise<TopicRow> {
  const [row] = await db
    .insert(topics)
    .values({ ...input, projectId })
    .returning();
  return row;
}

/** A topic of the project, or `undefined`. */
export async function getTopic(db: DbOrTx, projectId: string, id: string): Promise<TopicRow | undefined> {
  const [row] = await db
    .select()
    .from(topics)
    .where(and(eq(topics.projectId, projectId), eq(topics.id, id)));
  return row;
}

/** Topics newest first by keyset, with the total. */
export async function listTopics(db: DbOrTx, projectId: string, q: { limit: number; beforeId?: string }) {
  return keysetList(db, topics, eq(topics.projectId, projectId), q);
}

/** Every topic of the project, oldest first (the preference center's order). */
export async function allTopics(db: DbOrTx, projectId: string): Promise<TopicRow[]> {
  return db.select().from(topics).where(eq(topics.projectId, projectId)).orderBy(asc(topics.id));
}

/** Updates a topic. @returns the row, or `undefined` when it is not the project's. */
export async function updateTopic(
  db: DbOrTx,
  projectId: string,
  id: string,
  patch: Partial<TopicInput>,
): Promise<TopicRow | undefined> {
  const [row] = await db
    .update(topics)
    .set({ ...patch, updatedAt: new Date() })
    .where(and(eq(topics.projectId, projectId), eq(topics.id, id)))
    .returning();
  return row;
}

/** Deletes a topic with every contact's choice for it. @returns whether it existed. */
export async function deleteTopic(db: DbOrTx, projectId: string, id: string): Promise<boolean> {
  const rows = await db
    .delete(topics)
    .where(and(eq(topics.projectId, projectId), eq(topics.id, id)))
    .returning({ id: topics.id });
  return rows.length > 0;
}

/** Which of `ids` are not topics of the project. */
export async function missingTopics(db: DbOrTx, projectId: string, ids: string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const rows = await db.execute<{ id: string }>(sql`
    select t.id from topics t where t.project_id = ${projectId}::uuid and t.id = any(${sql.param(ids)}::uuid[])
  `);
  const found = new Set(rows.rows.map((r) => r.id));
  return ids.filter((id) => !found.has(id));
}

/** Topic ids by lower-cased name, for the names given (imports' `topic:<name>` columns). */
export async function topicIdsByName(db: DbOrTx, projectId: string, names: string[]): Promise<Map<string, string>> {
  if (names.length === 0) return new Map();
  const rows = await db.execute<{ id: string; name: string }>(sql`
    select id, lower(name) as name from topics where project_id = ${projectId}::uuid and lower(name) = any(${sql.param(names.map((n) => n.toLowerCase()))}::text[])
  `);
  return new Map(rows.rows.map((r) => [r.name, r.id]));
}

/** One topic as a contact stands with it. */
export interface ContactTopicState {
  topicId: string;
  name: string;
  description: string | null;
  visibility: TopicVisibility;
  defaultSubscription: TopicDefault;
  /** Whether the contact receives the topic's mail (its choice, else the default); the global flag aside. */
  subscribed: boolean;
  /** Whether the contact chose (`false`: the default applies). */
  explicit: boolean;
}

/** Every topic of the project with the contact's standing, oldest topic first. */
export async function contactTopicStates(
  db: DbOrTx,
  projectId: string,
  contactId: string,
): Promise<ContactTopicState[]> {
  const rows = await db.execute<{
    id: string;
    name: string;
    description: string | null;
    visibility: TopicVisibility;
    default_subscription: TopicDefault;
    chosen: boolean | null;
  }>(sql`
    select t.id, t.name, t.description, t.visibility, t.default_subscription, ct.subscribed as chosen
    from topics t left join contact_topics ct on ct.topic_id = t.id and ct.contact_id = ${contactId}::uuid
    where t.project_id = ${projectId}::uuid order by t.id
  `);
  return rows.rows.map((r) => ({
    topicId: r.id,
    name: r.name,
    description: r.description,
    visibility: r.visibility,
    defaultSubscription: r.default_subscription,
    subscribed: r.chosen ?? r.default_subscription === 'opt_out',
    explicit: r.chosen !== null,
  }));
}

/** A contact's choice for one topic. */
export interface TopicChoice {
  topicId: string;
  subscribed: boolean;
}

/** A topic whose standing a call changed. */
export interface TopicChange {
  topicId: string;
  topicName: string;
  subscribed: boolean;
}

/**
 * Records a contact's choices (the last choice per topic wins), in one statement, and for every topic whose
 * standing changed (explicit choice or default before, the choice after) records the event
 * `contact.topic_subscribed` / `contact.topic_unsubscribed` (workflow triggers read it). Topics not of the project
 * are ignored: callers check them first ({@link missingTopics}).
 *
 * @param opts.method - how the choice was made (`api`, `import`, `link`, `one-click`, `confirmation`).
 * @param opts.emailId - the email whose link made it, if any.
 * @param opts.test - a test key's request: the events are test events.
 * @returns the changes (the webhooks to announce).
 */
export async function setContactTopics(
  db: DbOrTx,
  projectId: string,
  contactId: string,
  choices: TopicChoice[],
  opts: { method: string; emailId?: string | null; test?: boolean },
): Promise<TopicChange[]> {
  const last = new Map<string, boolean>();
  for (const c of choices) last.set(c.topicId, c.subscribed);
  if (last.size === 0) return [];
  const input = JSON.stringify([...last].map(([topic_id, subscribed]) => ({ topic_id, subscribed })));
  const rows = await db.execute<{ topic_id: string; name: string; subscribed: boolean }>(sql`
    with input as (select * from jsonb_to_recordset(${input}::jsonb) as x(topic_id uuid, subscribed boolean)),
    owner as (select id from contacts where id = ${contactId}::uuid and project_id = ${projectId}::uuid),
    prior as (
      select t.id, t.name, coalesce(ct.subscribed, t.default_subscription = 'opt_out') as was
      from topics t join input i on i.topic_id = t.id
      left join contact_topics ct on ct.contact_id = ${contactId}::uuid and ct.topic_id = t.id
      where t.project_id = ${projectId}::uuid and exists (select 1 from owner)
    ),
    up as (
      insert into contact_topics (contact_id, topic_id, project_id, subscribed, updated_at)
      select ${contactId}::uuid, i.topic_id, ${projectId}::uuid, i.subscribed, now() from input i join prior p on p.id = i.topic_id
      on conflict (contact_id, topic_id) do update set subscribed = excluded.subscribed, updated_at = now()
      returning topic_id, subscribed
    ),
    changed as (select up.topic_id, p.name, up.subscribed from up join prior p on p.id = up.topic_id where p.was <> up.subscribed),
    ev as (
      insert into events (id, project_id, contact_id, name, data, created_at, test)
      select mailroom_uuid_v7(clock_timestamp()), ${projectId}::uuid, ${contactId}::uuid,
        case when c.subscribed then 'contact.topic_subscribed' else 'contact.topic_unsubscribed' end,
        jsonb_build_object('topicId', c.topic_id, 'topicName', c.name, 'method', ${opts.method}::text, 'emailId', ${opts.emailId ?? null}::uuid),
        clock_timestamp(), ${opts.test ?? false}::boolean
      from changed c
    )
    select topic_id, name, subscribed from changed
  `);
  return rows.rows.map((r) => ({ topicId: r.topic_id, topicName: r.name, subscribed: r.subscribed }));
}
