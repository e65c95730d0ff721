/**
 * Topic choices as the outbound webhooks announce them (docs/guides/webhooks.md, contact events):
 * `contact.topic_subscribed` / `contact.topic_unsubscribed`, one per topic whose standing changed.
 *
 * @module
 */
import type { WebhookEvent } from '@mailroom/db/queries/webhooks';
import type { TopicChange } from './queries/topics';

/**
 * The webhook events of topic changes (`setContactTopics`' result).
 *
 * @param contact - the contact (`id`, `email`).
 * @param opts.method - how the choice was made: `api`, `import`, `link` (the preference center), `one-click`
 *   (RFC 8058) or `confirmation` (a double opt-in confirmed).
 * @param opts.emailId - the email whose link made it, if any.
 */
export function topicWebhookEvents(
  contact: { id: string; email: string },
  changes: readonly TopicChange[],
  opts: { method: string; emailId?: string | null },
): WebhookEvent[] {
  return changes.map((c) => ({
    type: c.subscribed ? 'contact.topic_subscribed' : 'contact.topic_unsubscribed',
    data: {
      contactId: contact.id,
      email: contact.email,
      topicId: c.topicId,
      topicName: c.topicName,
      method: opts.method,
      emailId: opts.emailId ?? null,
    },
  }));
}
