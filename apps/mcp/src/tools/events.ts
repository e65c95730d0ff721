/**
 * Tool for events: record one for a contact (it may start workflows and feed segments).
 *
 * @module
 */
import * as z from 'zod';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { MailroomClient } from '@mailroom/client/client';
import { answer } from '../result';
import { contactDataSchema } from './schemas';

/** Registers `track_event`. */
export function registerEventTools(server: McpServer, mailroom: MailroomClient): void {
  server.registerTool(
    'track_event',
    {
      title: 'Track an event',
      description:
        'Records an event (e.g. "signed-up", "purchase") for a contact, creating the contact if needed. Events start workflows whose trigger is that event and can be used in segment filters (event.<name>).',
      inputSchema: {
        email: z.string().describe('contact email address'),
        event: z.string().min(1).describe('event name'),
        data: contactDataSchema.optional(),
        subscribed: z.boolean().optional().describe("set the contact's subscription as well"),
      },
    },
    (body) => answer(mailroom.POST('/v1/track', { body })),
  );
}
