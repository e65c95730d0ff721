/**
 * A stand-in for Amazon SNS on loopback: its own RSA key and self-signed X.509 certificate served over HTTP (the
 * `SigningCertURL`), messages signed exactly as SNS signs them (SignatureVersion 1: SHA1withRSA, 2:
 * SHA256withRSA over the canonical string), a `SubscribeURL` that counts confirmations, and SES event records in
 * the documented event-publishing shape.
 */
import { createSign, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { generate } from 'selfsigned';
import { snsStringToSign, type SnsMessage } from '@mailroom/feedback/sns';

export interface SnsHarness {
  /** `127.0.0.1:<port>`: the value of SNS_CERT_HOSTS for the API under test. */
  certHost: string;
  topicArn: string;
  certUrl: string;
  /** Paths of SubscribeURL requests received. */
  confirmations: string[];
  /** A signed Notification carrying `message` (an SES event record). */
  notification(
    message: object | string,
    opts?: { messageId?: string; version?: '1' | '2'; topicArn?: string; certUrl?: string },
  ): SnsMessage;
  /** A signed SubscriptionConfirmation or UnsubscribeConfirmation. */
  confirmation(type: 'SubscriptionConfirmation' | 'UnsubscribeConfirmation'): SnsMessage;
  /** Signs (or re-signs) a message with the harness key. */
  sign(m: Omit<SnsMessage, 'Signature'>): SnsMessage;
  close(): Promise<void>;
}

/** Starts the certificate server and returns a signer. */
export async function startSnsHarness(): Promise<SnsHarness> {
  const pems = await generate([{ name: 'commonName', value: 'sns.us-east-1.amazonaws.com' }], {
    keySize: 2048,
    algorithm: 'sha256',
  });
  const confirmations: string[] = [];
  const server = http.createServer((req, res) => {
    if (req.url === '/SimpleNotificationService-test.pem') {
      res.writeHead(200, { 'content-type': 'application/x-pem-file' }).end(pems.cert);
      return;
    }
    if (req.url?.startsWith('/confirm')) {
      confirmations.push(req.url);
      res.writeHead(200, { 'content-type': 'text/xml' }).end('<ConfirmSubscriptionResponse/>');
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const certHost = `127.0.0.1:${port}`;
  const certUrl = `http://${certHost}/SimpleNotificationService-test.pem`;
  const topicArn = `arn:aws:sns:us-east-1:123456789012:ses-events-${randomUUID().slice(0, 8)}`;

  const sign = (m: Omit<SnsMessage, 'Signature'>): SnsMessage => {
    const signer = createSign(m.SignatureVersion === '1' ? 'RSA-SHA1' : 'RSA-SHA256');
    signer.update(snsStringToSign(m as SnsMessage), 'utf8');
    return { ...m, Signature: signer.sign(pems.private, 'base64') };
  };

  return {
    certHost,
    topicArn,
    certUrl,
    confirmations,
    sign,
    notification: (message, opts = {}) =>
      sign({
        Type: 'Notification',
        MessageId: opts.messageId ?? randomUUID(),
        TopicArn: opts.topicArn ?? topicArn,
        Message: typeof message === 'string' ? message : JSON.stringify(message),
        Timestamp: new Date().toISOString(),
        SignatureVersion: opts.version ?? '1',
        SigningCertURL: opts.certUrl ?? certUrl,
        UnsubscribeURL: `http://${certHost}/unsubscribe`,
      }),
    confirmation: (type) =>
      sign({
        Type: type,
        MessageId: randomUUID(),
        TopicArn: topicArn,
        Token: randomUUID().replace(/-/g, ''),
        Message: `You have chosen to subscribe to the topic ${topicArn}.`,
        SubscribeURL: `http://${certHost}/confirm?Action=ConfirmSubscription&TopicArn=${encodeURIComponent(topicArn)}`,
        Timestamp: new Date().toISOString(),
        SignatureVersion: '2',
        SigningCertURL: certUrl,
      }),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** An SES event record (event publishing) about message `messageId` sent to `to`. */
export function sesEvent(
  eventType:
    'Send' | 'Delivery' | 'DeliveryDelay' | 'Bounce' | 'Complaint' | 'Reject' | 'Open' | 'Click' | 'Rendering Failure',
  mail: { messageId: string; to: string; emailId?: string; projectId?: string },
  extra: { bounceType?: 'Permanent' | 'Transient' | 'Undetermined'; link?: string; at?: Date } = {},
): object {
  const at = (extra.at ?? new Date()).toISOString();
  const tags: Record<string, string[]> = { 'ses:configuration-set': ['mailroom'] };
  if (mail.emailId) tags.email_id = [mail.emailId];
  if (mail.projectId) tags.project_id = [mail.projectId];
  const record: Record<string, unknown> = {
    eventType,
    mail: {
      timestamp: at,
      source: 'sender@example.com',
      sendingAccountId: '123456789012',
      messageId: mail.messageId,
      destination: [mail.to],
      headersTruncated: false,
      tags,
    },
  };
  switch (eventType) {
    case 'Delivery':
      record.delivery = {
        timestamp: at,
        processingTimeMillis: 546,
        recipients: [mail.to],
        smtpResponse: '250 2.6.0 Message received',
        reportingMTA: 'a8-70.smtp-out.amazonses.com',
      };
      break;
    case 'DeliveryDelay':
      record.deliveryDelay = {
        timestamp: at,
        delayType: 'MailboxFull',
        expirationTime: at,
        delayedRecipients: [{ emailAddress: mail.to, status: '4.2.2', diagnosticCode: '452 4.2.2 Mailbox full' }],
      };
      break;
    case 'Bounce':
      record.bounce = {
        bounceType: extra.bounceType ?? 'Permanent',
        bounceSubType: extra.bounceType === 'Transient' ? 'MailboxFull' : 'General',
        bouncedRecipients: [
          { emailAddress: mail.to, action: 'failed', status: '5.1.1', diagnosticCode: 'smtp; 550 5.1.1 user unknown' },
        ],
        timestamp: at,
        feedbackId: `0100-${randomUUID()}`,
        reportingMTA: 'dsn; e226-55.smtp-out.amazonses.com',
      };
      break;
    case 'Complaint':
      record.complaint = {
        complainedRecipients: [{ emailAddress: mail.to }],
        timestamp: at,
        feedbackId: `0100-${randomUUID()}`,
        userAgent: 'Mozilla/5.0',
        complaintFeedbackType: 'abuse',
        arrivalDate: at,
      };
      break;
    case 'Reject':
      record.reject = { reason: 'Bad content' };
      break;
    case 'Open':
      record.open = { ipAddress: '192.0.2.1', timestamp: at, userAgent: 'Mozilla/5.0' };
      break;
    case 'Click':
      record.click = {
        ipAddress: '192.0.2.1',
        timestamp: at,
        userAgent: 'Mozilla/5.0',
        link: extra.link ?? 'https://example.com/pricing',
        linkTags: { campaign: ['fall'] },
      };
      break;
    case 'Rendering Failure':
      record.failure = { errorMessage: 'Attribute name is missing', templateName: 'MyTemplate' };
      break;
    default:
      record.send = {};
  }
  return record;
}
