/**
 * The preference center behind the unsubscribe link (docs/guides/topics.md, preference center): a contact's
 * standing with the project's public topics, saving the page's checkboxes, and the one-click unsubscribe of a topic's
 * email (RFC 8058), which leaves that topic only. Each change records `contact.topic_subscribed` /
 * `contact.topic_unsubscribed` (event and webhook) with the email and the method (`link` or `one-click`).
 *
 * @module
 */
import { sql } from 'drizzle-orm';
import {
  contactTopicStates,
  setContactTopics,
  type ContactTopicState,
  type TopicChange,
} from '@mailroom/contacts/queries/topics';
import { countTopicUnsubscribe, type UnsubscribeTarget } from '@mailroom/contacts/queries/unsubscribe';
import { commitWithOutbox, type OutboxDeps } from '@mailroom/webhooks/outbox';
import { topicWebhookEvents } from '@mailroom/contacts/topics';
import type { Logger } from '@mailroom/platform/logger';
import type { DbOrTx } from '@mailroom/db/client';

/** What the preference center shows for a token's contact. */
export interface Preferences {
  /** Whether the contact receives marketing email at all (the global switch). */
  subscribed: boolean;
  /** The public topics with the contact's standing, oldest first. */
  topics: ContactTopicState[];
  /** The email's own topic (public or not), when it has one. */
  emailTopic: ContactTopicState | undefined;
}

/** The preferences of a target's contact, or `undefined` when the contact is gone. */
export async function preferencesOf(db: DbOrTx, target: UnsubscribeTarget): Promise<Preferences | undefined> {
  if (!target.contactId) return undefined;
  const rows = await db.execute<{ subscribed: boolean }>(
    sql`select subscribed from contacts where id = ${target.contactId}::uuid and project_id = ${target.projectId}::uuid`,
  );
  if (!rows.rows[0]) return undefined;
  const all = await contactTopicStates(db, target.projectId, target.contactId);
  return {
    subscribed: rows.rows[0].subscribed,
    topics: all.filter((t) => t.visibility === 'public'),
    emailTopic: all.find((t) => t.topicId === target.topicId),
  };
}

async function changeTopics(
  deps: OutboxDeps,
  log: Logger,
  target: UnsubscribeTarget,
  choices: { topicId: string; subscribed: boolean }[],
  method: 'link' | 'one-click',
): Promise<TopicChange[]> {
  const contactId = target.contactId;
  if (!contactId || choices.length === 0) return [];
  return commitWithOutbox(
    deps,
    log,
    target.projectId,
    async (tx) => {
      const test = await tx.execute<{ test: boolean }>(sql`select test from emails where id = ${target.emailId}::uuid`);
      const changes = await setContactTopics(tx, target.projectId, contactId, choices, {
        method,
        emailId: target.emailId,
        test: test.rows[0]?.test ?? false,
      });
      // Leaving the email's own topic through it is an unsubscribe from that mail: counted on its campaign.
      if (changes.some((c) => c.topicId === target.topicId && !c.subscribed))
        await countTopicUnsubscribe(tx, target, method);
      return changes;
    },
    (changes) =>
      topicWebhookEvents({ id: contactId, email: target.toEmail }, changes, { method, emailId: target.emailId }),
  );
}

/**
 * Unsubscribes the target's contact from the email's topic only (a topic email's one-click POST, or the page's
 * "unsubscribe from this topic"). @returns whether this call changed it.
 */
export async function unsubscribeTopicThroughLink(
  deps: OutboxDeps,
  log: Logger,
  target: UnsubscribeTarget,
  oneClick: boolean,
): Promise<boolean> {
  if (!target.topicId) return false;
  const changes = await changeTopics(
    deps,
    log,
    target,
    [{ topicId: target.topicId, subscribed: false }],
    oneClick ? 'one-click' : 'link',
  );
  return changes.length > 0;
}

/**
 * Saves the preference center's form: every public topic is subscribed when its id is among `checked`, and
 * unsubscribed otherwise (private topics are untouched; ids of other topics are ignored).
 *
 * @returns the topics whose standing changed.
 */
export async function savePreferences(
  deps: OutboxDeps,
  log: Logger,
  target: UnsubscribeTarget,
  checked: ReadonlySet<string>,
): Promise<TopicChange[]> {
  const prefs = await preferencesOf(deps.database.db, target);
  if (!prefs) return [];
  return changeTopics(
    deps,
    log,
    target,
    prefs.topics.map((t) => ({ topicId: t.topicId, subscribed: checked.has(t.topicId) })),
    'link',
  );
}
