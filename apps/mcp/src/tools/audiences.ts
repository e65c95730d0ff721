/**
 * Tools for audiences and campaigns: preview and create a segment, draft a campaign, send it (only with an explicit
 * confirmation), read its statistics.
 *
 * @module
 */
import * as z from 'zod';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { MailroomClient } from '@mailroom/client/client';
import { answer, toolError } from '../result';
import { filterSchema } from './schemas';

/** Registers `preview_segment`, `create_segment`, `draft_campaign`, `send_campaign` and `get_campaign_stats`. */
export function registerAudienceTools(server: McpServer, mailroom: MailroomClient): void {
  server.registerTool(
    'preview_segment',
    {
      title: 'Preview a segment filter',
      description:
        'How many contacts a filter matches now, with a sample of them. Changes nothing: use it before create_segment.',
      inputSchema: {
        filter: filterSchema,
        sampleSize: z
          .number()
          .int()
          .min(0)
          .max(50)
          .optional()
          .describe('how many matching contacts to show (default 10)'),
      },
    },
    ({ filter, sampleSize }) =>
      answer(mailroom.POST('/segments/preview', { body: { filter, sampleSize: sampleSize ?? 10 } }), (d) => ({
        count: d.count,
        sample: d.sample.map((c) => ({ id: c.id, email: c.email, subscribed: c.subscribed })),
      })),
  );

  server.registerTool(
    'create_segment',
    {
      title: 'Create a segment',
      description:
        'Saves a filter as a dynamic segment (its members are whoever matches at any time), to target a campaign with.',
      inputSchema: {
        name: z.string().min(1).describe('segment name'),
        description: z.string().optional().describe('what the segment is for'),
        filter: filterSchema,
      },
    },
    ({ name, description, filter }) => answer(mailroom.POST('/segments', { body: { name, description, filter } })),
  );

  server.registerTool(
    'draft_campaign',
    {
      title: 'Draft a campaign',
      description:
        'Creates a campaign in DRAFT: nothing is sent. The body must contain {{unsubscribeUrl}} (marketing mail carries an unsubscribe link). ' +
        'Send it with send_campaign once the user has confirmed.',
      inputSchema: {
        name: z.string().min(1).describe('internal name'),
        subject: z.string().min(1).describe('subject line; {{key}} placeholders are filled from each contact'),
        body: z
          .string()
          .min(1)
          .describe('HTML body with {{unsubscribeUrl}}; {{key}} placeholders are filled from each contact'),
        from: z.string().describe("sender address on one of the project's verified domains"),
        audience: z
          .enum(['ALL', 'SEGMENT', 'FILTERED'])
          .describe('ALL subscribed contacts, a SEGMENT (segmentId), or FILTERED by filter'),
        segmentId: z.string().optional().describe('with audience SEGMENT'),
        filter: filterSchema.optional().describe('with audience FILTERED'),
      },
    },
    ({ audience, filter, ...rest }) =>
      answer(
        mailroom.POST('/campaigns', {
          body: { ...rest, audienceType: audience, ...(filter ? { audienceFilter: filter } : {}) },
        }),
        (d) => ({
          id: d.id,
          name: d.name,
          status: d.status,
          audienceType: d.audienceType,
          segmentId: d.segmentId,
          subject: d.subject,
          from: d.from,
        }),
      ),
  );

  server.registerTool(
    'send_campaign',
    {
      title: 'Send a campaign (needs confirm: true)',
      description:
        'Sends a DRAFT campaign to its whole audience now, or schedules it (scheduledAt). This mails real people and cannot be undone: ' +
        'call it only after the user explicitly confirmed, with confirm set to true; without it nothing is sent.',
      inputSchema: {
        id: z.string().describe('campaign id'),
        confirm: z.boolean().optional().describe('must be true: the user confirmed sending this campaign'),
        scheduledAt: z.string().optional().describe('ISO 8601 time to send at instead of now'),
      },
      annotations: { destructiveHint: true, idempotentHint: false, openWorldHint: true },
    },
    async ({ id, confirm, scheduledAt }) => {
      if (confirm !== true) {
        return toolError(
          'CONFIRMATION_REQUIRED',
          'Not sent. Sending a campaign mails its whole audience and cannot be undone: ask the user to confirm, then call send_campaign again with confirm: true.',
        );
      }
      return answer(
        mailroom.POST('/campaigns/{id}/send', { params: { path: { id } }, body: scheduledAt ? { scheduledAt } : {} }),
        (d) => ({
          id: d.id,
          status: d.status,
          scheduledAt: d.scheduledAt,
          recipients: d.recipients,
        }),
      );
    },
  );

  server.registerTool(
    'get_campaign_stats',
    {
      title: "Read a campaign's statistics",
      description:
        "A campaign's progress and results: recipients, sent, delivered, opened, clicked, bounced, complained, failed, rates and ETA.",
      inputSchema: { id: z.string().describe('campaign id') },
      annotations: { readOnlyHint: true },
    },
    ({ id }) => answer(mailroom.GET('/campaigns/{id}/stats', { params: { path: { id } } })),
  );
}
