/**
 * The outbound webhooks as OpenAPI 3.1 `webhooks`: one operation per event type the platform emits
 * (`WEBHOOK_EVENT_TYPES`), each with its payload schema. Every delivery is a `POST` of
 * `{ type, timestamp, data }` signed per the Standard Webhooks specification (`webhook-id`, `webhook-timestamp`,
 * `webhook-signature`); a 2xx answer within WEBHOOK_TIMEOUT_MS ends it, anything else is retried on
 * WEBHOOK_RETRY_SCHEDULE_MS.
 *
 * @module
 */
import { SUPPRESSION_CAUSES } from '@mailroom/db/queries/suppression-rule';
import { WEBHOOK_EVENT_TYPES, type WebhookEventType } from '@mailroom/webhooks/webhooks';

type Schema = Record<string, unknown>;

const uuid = { type: 'string', format: 'uuid' };
const nullableUuid = { type: ['string', 'null'], format: 'uuid' };
const test = { type: 'boolean', const: true, description: 'present on events of test data (made with a test key)' };

/** `data` of the email events: the email, its addresses and its status after the event. */
const emailData = (status: string[], extra: Record<string, Schema> = {}, description?: string): Schema => ({
  type: 'object',
  ...(description ? { description } : {}),
  required: ['emailId', 'contactId', 'campaignId', 'messageId', 'to', 'from', 'status', 'tags'],
  properties: {
    emailId: uuid,
    contactId: nullableUuid,
    campaignId: { ...nullableUuid, description: 'the campaign that sent it, or null' },
    messageId: { type: ['string', 'null'], description: "SES's message id (null before SES accepted it)" },
    to: { type: 'string', format: 'email' },
    from: { type: 'string' },
    status: {
      type: 'string',
      enum: status,
      description: "the email's status after this event (it only moves forward)",
    },
    variant: {
      type: 'integer',
      description: "an A/B-tested campaign's variant (0-based) the email carried; absent for other emails",
    },
    tags: {
      type: 'array',
      description:
        "the email's { name, value } tags as the sender gave them (a campaign's emails carry the campaign's); [] when none",
      items: {
        type: 'object',
        required: ['name', 'value'],
        properties: { name: { type: 'string' }, value: { type: 'string' } },
      },
    },
    ...extra,
    test,
  },
});

const feedbackStatus = ['sent', 'delivered', 'opened', 'clicked', 'bounced', 'complained', 'failed'];
const smtp = {
  smtpStatus: { type: 'string', description: 'enhanced status code, e.g. 5.1.1' },
  diagnosticCode: { type: 'string' },
};

const contactData = (extra: Record<string, Schema>, required: string[]): Schema => ({
  type: 'object',
  required: ['contactId', 'email', ...required],
  properties: { contactId: nullableUuid, email: { type: 'string', format: 'email' }, ...extra, test },
});

/** `data` fields of the two snooze events. */
const snooze = (untilDescription: string): Record<string, Schema> => ({
  snoozedUntil: { type: ['string', 'null'], format: 'date-time', description: untilDescription },
  previousSnoozedUntil: {
    type: ['string', 'null'],
    format: 'date-time',
    description: 'the end it had before (null: it was not snoozed)',
  },
  method: { type: 'string', enum: ['api', 'link', 'expired'] },
  emailId: { ...nullableUuid, description: 'the email whose unsubscribe page paused it (`link`)' },
  campaignId: nullableUuid,
});
/** `data` of the topic events beside the contact's fields. */
const topicData: Record<string, Schema> = {
  topicId: uuid,
  topicName: { type: 'string' },
  method: { type: 'string', enum: ['api', 'import', 'link', 'one-click', 'confirmation'] },
  emailId: { ...nullableUuid, description: 'the email whose link made the choice' },
};

const campaignData = (extra: Record<string, Schema> = {}): Schema => ({
  type: 'object',
  required: ['campaignId'],
  properties: { campaignId: uuid, ...extra, test },
});

const workflowData = (status: string, extra: Record<string, Schema> = {}): Schema => ({
  type: 'object',
  required: ['workflowId', 'executionId', 'contactId', 'status'],
  properties: { workflowId: uuid, executionId: uuid, contactId: uuid, status: { const: status }, ...extra, test },
});

/** Per event type: when it is sent, and its `data`. A new event type without an entry fails the type check. */
const EVENTS: Record<WebhookEventType, { summary: string; data: Schema }> = {
  'email.sent': { summary: 'SES accepted the email', data: emailData(['sent']) },
  'email.delivered': {
    summary: "The recipient's server accepted the email",
    data: emailData(feedbackStatus, {
      smtpResponse: { type: 'string' },
      processingTimeMillis: { type: 'integer' },
      reportingMTA: { type: 'string' },
    }),
  },
  'email.delivery_delayed': {
    summary: 'Delivery is delayed; SES keeps trying',
    data: emailData(feedbackStatus, { delayType: { type: 'string' }, expirationTime: { type: 'string' }, ...smtp }),
  },
  'email.opened': {
    summary: 'The email was opened (open tracking)',
    data: emailData(feedbackStatus, { ipAddress: { type: 'string' }, userAgent: { type: 'string' } }),
  },
  'email.clicked': {
    summary: 'A link was clicked (click tracking)',
    data: emailData(feedbackStatus, {
      link: { type: 'string' },
      linkTags: { type: 'object' },
      ipAddress: { type: 'string' },
      userAgent: { type: 'string' },
    }),
  },
  'email.bounced': {
    summary: 'The email bounced (hard: suppressed at once; soft: after SOFT_BOUNCE_LIMIT)',
    data: emailData(feedbackStatus, {
      bounceType: { type: 'string', enum: ['Permanent', 'Transient', 'Undetermined'] },
      bounceSubType: { type: 'string' },
      feedbackId: { type: 'string' },
      ...smtp,
    }),
  },
  'email.complained': {
    summary: 'The recipient marked the email as spam (the address is suppressed and the contact unsubscribed)',
    data: emailData(feedbackStatus, {
      complaintFeedbackType: { type: 'string' },
      complaintSubType: { type: 'string' },
      userAgent: { type: 'string' },
      feedbackId: { type: 'string' },
    }),
  },
  'email.failed': {
    summary: 'The email was not sent: a permanent SES error, retries exhausted, rejected, or a rendering failure',
    data: emailData(['failed'], { reason: { type: 'string' } }),
  },
  'email.suppressed': {
    summary:
      'The email was stored but not sent: the address is on the suppression list, or a marketing email went to a contact not subscribed',
    data: emailData(['suppressed'], {
      cause: { type: 'string', enum: [...SUPPRESSION_CAUSES], description: 'why, as a code' },
      reason: { type: 'string', description: 'why, in words' },
    }),
  },
  'email.received': {
    summary: 'A message arrived for an inbound-enabled domain (SES receiving); its bytes: GET /inbound/{id}/raw',
    data: {
      type: 'object',
      required: ['inboundId', 'status', 'recipients', 'attachments', 'verdicts', 'receivedAt'],
      properties: {
        inboundId: uuid,
        status: {
          type: 'string',
          description: '`received`, or `failed` when the message could not be parsed (see `error`)',
        },
        error: { type: 'string' },
        messageId: { type: ['string', 'null'], description: 'its Message-ID header' },
        from: { type: ['string', 'null'] },
        fromName: { type: ['string', 'null'] },
        to: { type: 'array', items: { type: 'string' } },
        cc: { type: 'array', items: { type: 'string' } },
        recipients: {
          type: 'array',
          items: { type: 'string' },
          description: "the envelope recipients of this project's domains",
        },
        subject: { type: ['string', 'null'] },
        text: { type: ['string', 'null'] },
        html: { type: ['string', 'null'] },
        attachments: {
          type: 'array',
          items: { type: 'object' },
          description: 'metadata (filename, contentType, size); bytes: GET /inbound/{id}/attachments/{n}',
        },
        verdicts: { type: 'object', description: "SES's spam, virus, SPF, DKIM and DMARC verdicts" },
        contactId: { ...nullableUuid, description: "the sender's contact, when the sender is one" },
        inReplyToEmailId: {
          ...nullableUuid,
          description: 'the email of ours it replies to (In-Reply-To / References)',
        },
        receivedAt: { type: 'string', format: 'date-time' },
        test,
      },
    },
  },
  'contact.unsubscribed': {
    summary: 'A contact unsubscribed (API, unsubscribe link, one-click, complaint)',
    data: contactData(
      {
        method: { type: 'string', enum: ['api', 'link', 'one-click', 'complaint'] },
        emailId: nullableUuid,
        campaignId: nullableUuid,
      },
      ['method'],
    ),
  },
  'contact.suppressed': {
    summary: 'An address was added to the suppression list (bounce, complaint, or by the API)',
    data: contactData({ reason: { type: 'string' }, sourceEmailId: nullableUuid, suppressionId: uuid }, [
      'reason',
      'suppressionId',
    ]),
  },
  'contact.snoozed': {
    summary: 'A contact paused marketing email until a date (the API, or the unsubscribe page), or moved the date',
    data: contactData(snooze('the new end of the snooze'), ['snoozedUntil', 'method']),
  },
  'contact.unsnoozed': {
    summary:
      "A contact's snooze ended: cleared through the API (`method: api`) or run out (`expired`, within seconds of its end)",
    data: contactData(snooze('null'), ['previousSnoozedUntil', 'method']),
  },
  'contact.topic_subscribed': {
    summary: 'A contact subscribed to a topic (API, import, preference center, double opt-in confirmation)',
    data: contactData(topicData, ['topicId', 'topicName', 'method']),
  },
  'contact.topic_unsubscribed': {
    summary: "A contact left a topic (API, import, preference center, the one-click unsubscribe of the topic's mail)",
    data: contactData(topicData, ['topicId', 'topicName', 'method']),
  },
  'contact.confirmed': {
    summary: 'A contact confirmed a double opt-in (the proof of consent: time, IP address, user agent)',
    data: contactData(
      {
        confirmationId: uuid,
        topicIds: {
          type: 'array',
          items: uuid,
          description: 'the topics confirmed; empty: the global marketing subscription',
        },
        confirmedAt: { type: 'string', format: 'date-time' },
        ip: { type: ['string', 'null'] },
        userAgent: { type: ['string', 'null'] },
      },
      ['confirmationId', 'topicIds', 'confirmedAt'],
    ),
  },
  'campaign.sending': {
    summary: 'A campaign started sending (or its failed emails are sent again)',
    data: campaignData({ retryFailed: { type: 'boolean' }, retried: { type: 'integer' } }),
  },
  'campaign.paused': {
    summary: 'A campaign paused (by the API, a guardrail, or the SES quota)',
    data: campaignData({ reason: { type: 'string' } }),
  },
  'campaign.resumed': {
    summary: 'A paused campaign resumed',
    data: campaignData({ previousReason: { type: 'string' }, pausedMs: { type: 'integer' } }),
  },
  'campaign.sent': { summary: 'Every email of the campaign reached a final status', data: campaignData() },
  'campaign.cancelled': {
    summary: 'The campaign was cancelled; its unsent emails were cancelled with it',
    data: campaignData(),
  },
  'campaign.failed': { summary: 'The campaign could not be sent (e.g. its segment failed)', data: campaignData() },
  'campaign.winner': {
    summary: "An A/B test's winner was chosen (after the wait, or by hand); the rest of the audience gets it next",
    data: campaignData({
      winner: { type: 'integer', description: 'the winning variant (0-based)' },
      by: { type: 'string', enum: ['auto', 'manual'] },
      basis: { type: 'string', enum: ['metric', 'choice'] },
      metric: { type: 'string', enum: ['opens', 'clicks', 'event'] },
      pValue: { type: ['number', 'null'] },
      withinNoise: { type: 'boolean' },
    }),
  },
  'workflow.started': {
    summary: 'A workflow execution started',
    data: workflowData('RUNNING', { trigger: { type: 'string' } }),
  },
  'workflow.completed': { summary: 'A workflow execution reached its end', data: workflowData('COMPLETED') },
  'workflow.exited': {
    summary: 'A workflow execution exited early (exit condition, step removed)',
    data: workflowData('EXITED', { reason: { type: 'string' } }),
  },
  'workflow.failed': {
    summary: 'A workflow execution failed',
    data: workflowData('FAILED', { error: { type: 'string' } }),
  },
  'workflow.cancelled': {
    summary: 'A workflow execution was cancelled',
    data: workflowData('CANCELLED', { reason: { type: 'string' } }),
  },
};

const signatureHeaders = [
  {
    name: 'webhook-id',
    in: 'header',
    required: true,
    description: "the delivery's id (the same on every retry of it): deduplicate on it",
    schema: { type: 'string' },
  },
  {
    name: 'webhook-timestamp',
    in: 'header',
    required: true,
    description: 'Unix seconds of this attempt; refuse stale ones',
    schema: { type: 'string' },
  },
  {
    name: 'webhook-signature',
    in: 'header',
    required: true,
    description:
      "`v1,` + base64 HMAC-SHA256 of `${webhook-id}.${webhook-timestamp}.${body}` under the endpoint's secret (Standard Webhooks)",
    schema: { type: 'string' },
  },
];

/** The `webhooks` object of the document: one `post` per event type. */
export function webhookOperations(): Record<string, unknown> {
  return Object.fromEntries(
    WEBHOOK_EVENT_TYPES.map((type) => {
      const { summary, data } = EVENTS[type];
      const schema = {
        type: 'object',
        required: ['type', 'timestamp', 'data'],
        properties: {
          type: { const: type },
          timestamp: { type: 'string', format: 'date-time', description: 'when it happened' },
          data,
        },
      };
      return [
        type,
        {
          post: {
            operationId: `webhook_${type.replace('.', '_')}`,
            summary,
            description: `Sent to every enabled endpoint subscribed to \`${type}\`, \`${type.split('.')[0]}.*\` or \`*\`.`,
            tags: ['Webhooks'],
            parameters: signatureHeaders,
            requestBody: { required: true, content: { 'application/json': { schema } } },
            responses: {
              '2XX': {
                description:
                  'Received; any other answer (or none within WEBHOOK_TIMEOUT_MS) is retried on WEBHOOK_RETRY_SCHEDULE_MS',
              },
            },
          },
        },
      ];
    }),
  );
}
