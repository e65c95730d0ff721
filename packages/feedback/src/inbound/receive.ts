/**
 * A received message, from its SES receipt notification to its rows: the message's bytes (inline, or fetched from
 * S3 with `@aws-sdk/client-s3`), the projects it belongs to (the inbound-enabled domains of its recipients), one
 * `inbound_emails` row per project with its links (the sender's contact, the email of ours it answers), the
 * `email.received` event on the contact (what starts workflows; not for spam or virus `FAIL` unless
 * `INBOUND_WORKFLOWS_ON_SPAM`), and the `email.received` webhook deliveries: all in one transaction with the SNS
 * message id, so a redelivery changes nothing.
 *
 * A message that cannot be read (hostile or broken MIME, an S3 object that is gone, an action without content) is
 * stored as an error record (`status: failed`) and acknowledged: SNS would otherwise redeliver it for days. Only a
 * passing failure (S3 or Postgres unreachable) is left to SNS's retry.
 *
 * @module
 */
import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import type { Queue } from 'bullmq';
import { emailDomain, emailKey } from '@mailroom/platform/address';
import type { Logger } from '@mailroom/platform/logger';
import type { MailConfig } from '@mailroom/mail/config';
import type { QueueConfig } from '@mailroom/queues/config';
import type { WebhookJobPayload } from '@mailroom/queues/catalog';
import { relayWebhookDeliveries } from '@mailroom/queues/enqueue';
import type { Db } from '@mailroom/db/client';
import type { InboundVerdicts } from '@mailroom/db/schema/inbound';
import { recordWebhookEvents } from '@mailroom/db/queries/webhooks';
import type { WebhookDeliveryRef } from '@mailroom/db/queries/webhook-delivery-ref';
import {
  contactIdByEmailKey,
  inboundDomainOwners,
  insertInboundEmail,
  recordReceivedEvent,
  repliedEmailId,
  type NewInboundEmail,
} from '../queries/inbound';
import type { FeedbackConfig } from '../config';
import { recordSnsMessage } from '../queries/feedback';
import { SnsRejection } from '../sns';
import { InboundParseError, parseInbound, type ParsedInbound } from './parse';
import type { SesReceipt } from './receipt';
import { errorMessage } from '@mailroom/platform/errors';

/** What receiving needs. */
export interface InboundDeps {
  config: FeedbackConfig &
    Pick<MailConfig, 'sesRegion' | 'awsCredentials'> &
    Pick<QueueConfig, 'webhookRetryScheduleMs'>;
  db: Db;
  webhookQueue: Queue<WebhookJobPayload>;
}

/** What receiving one notification did. */
export interface InboundResult {
  /** The SNS message was handled before: nothing changed. */
  duplicate: boolean;
  /** The rows stored, one per project. */
  inbound: { projectId: string; id: string; status: 'received' | 'failed' }[];
  /** Why nothing was stored (no recipient on an inbound-enabled domain). */
  ignored?: string;
}

/** Whether the verdicts let the message start workflows: neither spam nor virus `FAIL` (unless configured so). */
export function triggersWorkflows(verdicts: InboundVerdicts, onSpam: boolean): boolean {
  return onSpam || (verdicts.spam !== 'FAIL' && verdicts.virus !== 'FAIL');
}

/** Error names of S3 that mean the object will never be there: an error record, not a retry. */
const S3_GONE = new Set(['NoSuchKey', 'NoSuchBucket', 'AccessDenied', 'InvalidObjectState']);

/** Creates the receiver (one S3 client for its lifetime, made on first use). */
export function createInboundReceiver(
  deps: InboundDeps,
): (receipt: SesReceipt, sns: { messageId: string; topicArn: string }, log: Logger) => Promise<InboundResult> {
  const { config, db } = deps;
  let s3: S3Client | undefined;
  const client = () =>
    (s3 ??= new S3Client({
      region: config.sesRegion,
      endpoint: config.inboundS3Endpoint,
      forcePathStyle: config.inboundS3Endpoint !== undefined,
      credentials:
        config.awsCredentials ??
        (config.inboundS3Endpoint ? { accessKeyId: 'local', secretAccessKey: 'local' } : undefined),
      maxAttempts: 2,
    }));

  /** The message's bytes, or why there are none (stored on the error record). @throws {@link SnsRejection} 503 when S3 is unreachable. */
  const content = async (receipt: SesReceipt): Promise<{ raw: Buffer } | { error: string }> => {
    const c = receipt.content;
    if (c.kind === 'inline') return { raw: c.raw };
    if (c.kind === 'none')
      return {
        error: `the receipt action ${c.actionType || '(none)'} carries no message content (use an SNS action with content, or an S3 action)`,
      };
    try {
      const out = await client().send(new GetObjectCommand({ Bucket: c.bucket, Key: c.key }));
      return { raw: Buffer.from(await out.Body!.transformToByteArray()) };
    } catch (err) {
      const name = (err as { name?: string }).name ?? 'Error';
      if (S3_GONE.has(name)) return { error: `S3 object s3://${c.bucket}/${c.key}: ${name}` };
      throw new SnsRejection(503, `cannot fetch s3://${c.bucket}/${c.key}: ${name}: ${errorMessage(err)}`);
    }
  };

  return async (receipt, sns, log) => {
    const byDomain = await inboundDomainOwners(db, [...new Set(receipt.recipients.map((r) => emailDomain(r)))]);
    const projects = new Map<string, string[]>();
    for (const r of receipt.recipients) {
      const projectId = byDomain.get(emailDomain(r));
      if (projectId) projects.set(projectId, [...(projects.get(projectId) ?? []), r]);
    }
    if (projects.size === 0) {
      const fresh = await recordSnsMessage(db, {
        messageId: sns.messageId,
        topicArn: sns.topicArn,
        type: 'Notification',
      });
      log.info(
        { sesMessageId: receipt.sesMessageId },
        'received message ignored: no recipient on an inbound-enabled domain',
      );
      return { duplicate: !fresh, inbound: [], ignored: 'no recipient on an inbound-enabled domain' };
    }

    const got = await content(receipt);
    let parsed: ParsedInbound | undefined;
    let error = 'error' in got ? got.error : undefined;
    if ('raw' in got) {
      try {
        parsed = await parseInbound(got.raw);
      } catch (err) {
        if (!(err instanceof InboundParseError)) throw err;
        error = err.message;
      }
    }
    const raw = 'raw' in got ? got.raw : null;
    const { references = [], ...fields } = parsed ?? {};
    // Links are looked up before the transaction (reads only): the sender's contact and the email answered, per project.
    const rows: NewInboundEmail[] = [];
    for (const [projectId, recipients] of projects) {
      const contactId = parsed?.fromEmail
        ? await contactIdByEmailKey(db, projectId, emailKey(parsed.fromEmail))
        : undefined;
      const inReplyToEmailId = parsed ? await repliedEmailId(db, projectId, references) : undefined;
      rows.push({
        projectId,
        sesMessageId: receipt.sesMessageId,
        status: parsed ? 'received' : 'failed',
        error: error ?? null,
        ...fields,
        recipients,
        raw,
        size: raw?.length ?? null,
        verdicts: receipt.verdicts,
        contactId: contactId ?? null,
        inReplyToEmailId: inReplyToEmailId ?? null,
        receivedAt: receipt.receivedAt,
      });
    }
    const starts = triggersWorkflows(receipt.verdicts, config.inboundWorkflowsOnSpam);
    const outcome = await db.transaction(async (tx) => {
      if (!(await recordSnsMessage(tx, { messageId: sns.messageId, topicArn: sns.topicArn, type: 'Notification' })))
        return undefined;
      const stored: InboundResult['inbound'] = [];
      const deliveries: WebhookDeliveryRef[] = [];
      for (const row of rows) {
        const id = await insertInboundEmail(tx, row);
        if (!id) continue;
        stored.push({ projectId: row.projectId, id, status: row.status });
        const data = webhookData(id, row);
        if (row.status === 'received' && row.contactId && starts)
          await recordReceivedEvent(
            tx,
            row.projectId,
            row.contactId,
            { inboundId: id, from: row.fromEmail, subject: row.subject, inReplyToEmailId: row.inReplyToEmailId },
            row.receivedAt,
          );
        deliveries.push(
          ...(await recordWebhookEvents(tx, row.projectId, [
            { type: 'email.received', occurredAt: row.receivedAt, data },
          ])),
        );
      }
      return { stored, deliveries };
    });
    if (!outcome) return { duplicate: true, inbound: [] };
    await relayWebhookDeliveries(deps.webhookQueue, config, outcome.deliveries, log);
    for (const s of outcome.stored)
      log.info(
        { projectId: s.projectId, inboundId: s.id, status: s.status, sesMessageId: receipt.sesMessageId, error },
        'message received',
      );
    return { duplicate: false, inbound: outcome.stored };
  };
}

/** The `email.received` payload: the parsed message and its attachments' metadata (their bytes: `GET /inbound/{id}/attachments/{n}`). */
function webhookData(id: string, row: NewInboundEmail): Record<string, unknown> {
  return {
    inboundId: id,
    status: row.status,
    ...(row.error ? { error: row.error } : {}),
    messageId: row.messageId ?? null,
    from: row.fromEmail ?? null,
    fromName: row.fromName ?? null,
    to: row.to ?? [],
    cc: row.cc ?? [],
    recipients: row.recipients,
    subject: row.subject ?? null,
    text: row.text ?? null,
    html: row.html ?? null,
    attachments: row.attachments ?? [],
    verdicts: row.verdicts,
    contactId: row.contactId ?? null,
    inReplyToEmailId: row.inReplyToEmailId ?? null,
    receivedAt: row.receivedAt.toISOString(),
  };
}
