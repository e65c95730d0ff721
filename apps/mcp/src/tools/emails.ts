/**
 * Tools for transactional email: send one (optionally from a template) and read what became of sent emails.
 *
 * @module
 */
import * as z from 'zod';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { MailroomClient, operations } from '@mailroom/client/client';
import { withIdempotencyKey } from '@mailroom/client/idempotency';
import { answer, errorResult, toolResult } from '../result';
import { unwrap } from '@mailroom/client/errors';

/** The statuses an email can be in (from the generated types). */
type EmailStatus = NonNullable<NonNullable<operations['listEmails']['parameters']['query']>['status']>;

/** Registers `send_email`, `list_recent_emails` and `get_email_status`. */
export function registerEmailTools(server: McpServer, mailroom: MailroomClient): void {
  server.registerTool(
    'send_email',
    {
      title: 'Send an email',
      description:
        'Sends a transactional email to one or more recipients (each gets their own email and is created or updated as a contact). ' +
        'Give subject and body, or a template id whose subject and body apply (subject/body then override it). ' +
        'Returns the id of each queued email: check delivery with get_email_status.',
      inputSchema: {
        to: z.union([z.string(), z.array(z.string()).min(1).max(100)]).describe('recipient address, or a list of them'),
        subject: z.string().optional().describe('subject line; {{key}} placeholders are filled from data'),
        body: z.string().optional().describe('HTML body; {{key}} placeholders are filled from data'),
        template: z
          .string()
          .optional()
          .describe('template id (from the templates list) to send instead of subject/body'),
        from: z
          .string()
          .optional()
          .describe(
            "sender address on one of the project's verified domains (default: the template's or the project's)",
          ),
        data: z
          .record(z.string(), z.unknown())
          .optional()
          .describe('values for the placeholders, also stored on the contact'),
        idempotencyKey: z
          .string()
          .min(1)
          .max(255)
          .optional()
          .describe(
            'the same key makes a repeated call return the first result instead of sending again (a fresh one by default)',
          ),
      },
    },
    ({ idempotencyKey, ...body }) =>
      answer(mailroom.POST('/v1/send', { params: { header: withIdempotencyKey(idempotencyKey) }, body }), (d) => ({
        emails: d.emails.map((e) => ({ email: e.contact.email, emailId: e.email, contactId: e.contact.id })),
        ...(d.suppressed?.length ? { suppressed: d.suppressed } : {}),
        timestamp: d.timestamp,
      })),
  );

  server.registerTool(
    'list_recent_emails',
    {
      title: 'List recent emails',
      description:
        "The project's most recent emails, newest first, with their status (queued, sending, sent, delivered, opened, clicked, bounced, complained, failed, suppressed…), " +
        'recipient, subject and times. Filter by status, recipient address, campaign or time window.',
      inputSchema: {
        limit: z.number().int().min(1).max(100).optional().describe('how many emails (default 20)'),
        status: z.string().optional().describe('only emails in this status, e.g. bounced or failed'),
        email: z.string().optional().describe('only emails to this recipient address'),
        campaignId: z.string().optional().describe("only this campaign's emails"),
        since: z.string().optional().describe('only emails created at or after this time (ISO 8601)'),
        cursor: z.string().optional().describe('nextCursor of a previous call, for the next (older) page'),
      },
      annotations: { readOnlyHint: true },
    },
    ({ limit, status, ...filters }) =>
      answer(
        // The API answers 400 naming `status` when it is not one of the statuses; the tool passes it through as given.
        mailroom.GET('/emails', {
          params: { query: { limit: limit ?? 20, status: status as EmailStatus | undefined, ...filters } },
        }),
        (d) => ({
          emails: d.items.map((e) => ({
            id: e.id,
            status: e.status,
            to: e.to.email,
            subject: e.subject,
            source: e.source,
            campaignId: e.campaignId,
            error: e.error,
            createdAt: e.createdAt,
            sentAt: e.sentAt,
            deliveredAt: e.deliveredAt,
          })),
          total: d.total,
          nextCursor: d.nextCursor,
        }),
      ),
  );

  server.registerTool(
    'get_email_status',
    {
      title: 'Get the status of emails',
      description:
        'The status of sent emails by id (queued, sending, sent, delivered, opened, clicked, bounced, complained, failed, suppressed…), ' +
        'with recipient, subject, times, error and the event timeline of each.',
      inputSchema: { ids: z.array(z.string()).min(1).max(25).describe('email ids, as send_email returned them') },
    },
    async ({ ids }) => {
      try {
        const emails = await Promise.all(
          ids.map(async (id) => unwrap(await mailroom.GET('/emails/{id}', { params: { path: { id } } }))),
        );
        return toolResult(
          emails.map((e) => ({
            id: e.id,
            status: e.status,
            to: e.to.email,
            subject: e.subject,
            error: e.error,
            createdAt: e.createdAt,
            sentAt: e.sentAt,
            deliveredAt: e.deliveredAt,
            openedAt: e.openedAt,
            clickedAt: e.clickedAt,
            timeline: e.timeline.map((t) => ({ type: t.type, at: t.at })),
          })),
        );
      } catch (err) {
        return errorResult(err);
      }
    },
  );
}
