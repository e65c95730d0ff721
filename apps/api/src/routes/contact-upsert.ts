/**
 * `POST /contacts` with topic choices and double opt-in (docs/guides/topics.md): the body beside the plain upsert's
 * fields, and the handler that writes the contact, its topic choices, and a double opt-in's confirmation and email
 * in the request's transaction (idempotent with an `Idempotency-Key`), then enqueues the email and the webhooks.
 *
 * @module
 */
import { Type, type Static } from '@sinclair/typebox';
import { validationError, type FieldError } from '@mailroom/platform/errors';
import type { Logger } from '@mailroom/platform/logger';
import { normalizeEmail } from '@mailroom/platform/address';
import { ContactInput, upsertContact } from '@mailroom/contacts/contacts';
import { topicWebhookEvents } from '@mailroom/contacts/topics';
import { resolveConfirmationEmail, startDoubleOptIn } from '@mailroom/contacts/double-opt-in';
import { setContactTopics } from '@mailroom/contacts/queries/topics';
import {
  holdTopicsForConfirmation,
  projectSigningKey,
  type ConfirmationRow,
} from '@mailroom/contacts/queries/confirmations';
import { recordWebhookEvents } from '@mailroom/db/queries/webhooks';
import type { DbOrTx } from '@mailroom/db/client';
import { sql } from 'drizzle-orm';
import { relayWebhookDeliveries, enqueueSendJobs } from '@mailroom/queues/enqueue';
import { SendPriority } from '@mailroom/queues/catalog';
import type { AppDeps, AuthContext } from '../http/context';
import { EmailAddress, Nullable, Timestamp } from './common';
import { checkTopicChoices, TopicChoices } from './topics';
import { SnoozeField, applySnooze, checkSnooze } from './contact-snooze';

/** The body of `POST /contacts`: a contact, topic choices, and the double opt-in's fields. */
export const UpsertBody = Type.Object(
  {
    ...ContactInput.properties,
    snoozedUntil: SnoozeField,
    topics: Type.Optional(TopicChoices),
    doubleOptIn: Type.Optional(
      Type.Boolean({
        description:
          'send a confirmation email; the contact (or, with topicIds, those topics) stays unsubscribed until confirmed',
      }),
    ),
    topicIds: Type.Optional(
      Type.Array(Type.String({ format: 'uuid' }), {
        maxItems: 100,
        uniqueItems: true,
        description: 'with doubleOptIn: the topics the confirmation subscribes to',
      }),
    ),
    confirmationTemplateId: Type.Optional(
      Type.String({
        format: 'uuid',
        description:
          'with doubleOptIn: a template of this project; {{confirmUrl}} in it is the link. Default: a built-in message',
      }),
    ),
    confirmationFrom: Type.Optional(EmailAddress),
    confirmationFromName: Type.Optional(Type.String({ maxLength: 200 })),
  },
  { additionalProperties: false },
);

/** A double opt-in confirmation as `GET /contacts/{id}` shows it: the proof of consent. */
export const Confirmation = Type.Object({
  id: Type.String(),
  status: Type.Union([Type.Literal('pending'), Type.Literal('confirmed'), Type.Literal('expired')]),
  topicIds: Type.Array(Type.String()),
  emailId: Nullable(Type.String({ description: 'the confirmation email' })),
  createdAt: Timestamp,
  confirmedAt: Nullable(Timestamp),
  ip: Nullable(Type.String({ description: 'the address the confirmation came from' })),
  userAgent: Nullable(Type.String({ description: 'the browser that confirmed' })),
  expiredAt: Nullable(Timestamp),
});

/** Presents a confirmation. */
export function presentConfirmation(c: ConfirmationRow): Static<typeof Confirmation> {
  return {
    id: c.id,
    status: c.confirmedAt ? 'confirmed' : c.expiredAt ? 'expired' : 'pending',
    topicIds: c.topicIds,
    emailId: c.emailId,
    createdAt: c.createdAt.toISOString(),
    confirmedAt: c.confirmedAt?.toISOString() ?? null,
    ip: c.ip,
    userAgent: c.userAgent,
    expiredAt: c.expiredAt?.toISOString() ?? null,
  };
}

/** The double opt-in fields given without `doubleOptIn: true`, and `subscribed` given with it. */
function doubleOptInErrors(body: Static<typeof UpsertBody>): FieldError[] {
  const errors: FieldError[] = [];
  if (body.doubleOptIn === true) {
    if (body.subscribed !== undefined)
      errors.push({
        field: 'subscribed',
        message: 'cannot be given with doubleOptIn: the confirmation subscribes',
        code: 'custom',
      });
  } else {
    for (const f of ['topicIds', 'confirmationTemplateId', 'confirmationFrom', 'confirmationFromName'] as const) {
      if (body[f] !== undefined)
        errors.push({ field: f, message: 'applies only with doubleOptIn: true', code: 'custom' });
    }
  }
  return errors;
}

/**
 * The handler of `POST /contacts`. @returns the stored contact and the answer's `_meta`.
 *
 * @throws {@link AppError} 422 naming the field: a topic not of the project (`topics.<i>.topicId`, `topicIds.<i>`),
 *   double opt-in fields without `doubleOptIn`, `subscribed` with it, an unknown template or a sender not on a
 *   verified domain (`confirmationTemplateId`, `confirmationFrom`).
 */
export async function upsertWithTopics(
  deps: AppDeps,
  ctx: {
    body: Static<typeof UpsertBody>;
    auth: AuthContext;
    db: DbOrTx;
    log: Logger;
    afterCommit: (fn: () => Promise<void>) => void;
  },
) {
  const { body, auth, db: tx, log } = ctx;
  const {
    topics,
    doubleOptIn,
    topicIds = [],
    confirmationTemplateId,
    confirmationFrom,
    confirmationFromName,
    snoozedUntil,
    ...input
  } = body;
  const until = checkSnooze(snoozedUntil);
  const errors = doubleOptInErrors(body);
  if (errors.length > 0) throw validationError(errors);
  if (topics)
    await checkTopicChoices(
      tx,
      auth.projectId,
      topics.map((t) => t.topicId),
      (i) => `topics.${i}.topicId`,
    );
  await checkTopicChoices(tx, auth.projectId, topicIds, (i) => `topicIds.${i}`);
  const email = doubleOptIn
    ? await resolveConfirmationEmail(tx, auth.projectId, {
        templateId: confirmationTemplateId,
        from: confirmationFrom,
        fromName: confirmationFromName,
        topicIds,
      })
    : undefined;
  const test = auth.mode === 'test';
  // A double opt-in's new contact is created unsubscribed (nothing marketing reaches it before it confirms); an
  // existing contact keeps its global subscription.
  const upserted = await upsertContact(
    tx,
    auth.projectId,
    doubleOptIn ? { ...input, ...(await isNew(tx, auth.projectId, input.email)) } : input,
    { test },
  );
  const snoozed = until === undefined ? undefined : await applySnooze(tx, auth.projectId, upserted.id, until, test);
  const c = snoozed ? { ...upserted, snoozedUntil: snoozed.snoozedUntil } : upserted;
  const changes = topics ? await setContactTopics(tx, auth.projectId, c.id, topics, { method: 'api', test }) : [];
  let confirmation: { id: string; emailId: string; topicIds: string[] } | undefined;
  if (doubleOptIn && email) {
    // The topics to confirm stay unsubscribed until then, unless the contact chose them before.
    if (topicIds.length > 0) {
      await holdTopicsForConfirmation(tx, auth.projectId, c.id, topicIds);
    }
    const signingKey = await projectSigningKey(tx, auth.projectId);
    const started = await startDoubleOptIn(tx, {
      projectId: auth.projectId,
      contact: c,
      createdContact: c.inserted,
      topicIds,
      email,
      signingKey: signingKey!,
      publicUrl: deps.config.publicUrl,
      test,
    });
    confirmation = { id: started.confirmation.id, emailId: started.emailId, topicIds };
  }
  const deliveries = await recordWebhookEvents(tx, auth.projectId, topicWebhookEvents(c, changes, { method: 'api' }));
  ctx.afterCommit(async () => {
    if (confirmation) {
      // A Redis failure leaves the email queued: the reconciler enqueues it.
      await enqueueSendJobs(deps.queues.send, deps.config, [
        { emailId: confirmation.emailId, projectId: auth.projectId, priority: SendPriority.transactional },
      ]).catch((err: unknown) => log.warn({ err }, 'confirmation email not enqueued; the reconciler will enqueue it'));
    }
    await relayWebhookDeliveries(
      deps.queues.webhook,
      deps.config,
      [...(snoozed?.deliveries ?? []), ...deliveries],
      log,
    );
  });
  return { contact: c, meta: { isNew: c.inserted, isUpdate: !c.inserted, ...(confirmation ? { confirmation } : {}) } };
}

/** `{ subscribed: false }` when no contact has the address yet (a double opt-in creates it unsubscribed). */
async function isNew(db: DbOrTx, projectId: string, email: string): Promise<{ subscribed?: false }> {
  const rows = await db.execute(
    sql`select 1 from contacts where project_id = ${projectId}::uuid and email_key = ${normalizeEmail(email).toLowerCase()}`,
  );
  return rows.rows.length === 0 ? { subscribed: false } : {};
}
