/**
 * Tools for contacts: look one up (by id or address, with its recent events) and update it.
 *
 * @module
 */
import * as z from 'zod';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { MailroomClient } from '@mailroom/client/client';
import { unwrap } from '@mailroom/client/errors';
import { errorResult, toolError, toolResult } from '../result';
import { contactDataSchema } from './schemas';

const who = {
  id: z.string().optional().describe('contact id'),
  email: z.string().optional().describe('contact email address (case-insensitive); used when id is not given'),
};

/** Registers `find_contact` and `update_contact`. */
export function registerContactTools(server: McpServer, mailroom: MailroomClient): void {
  /** The contact's id: `id` itself, or the contact whose address is `email`; undefined when none has it. */
  const resolveId = async (id: string | undefined, email: string | undefined): Promise<string | undefined> => {
    if (id) return id;
    const wanted = (email ?? '').trim().toLowerCase();
    const page = unwrap(await mailroom.GET('/contacts', { params: { query: { limit: 100, search: wanted } } }));
    return page.items.find((c) => c.email.toLowerCase() === wanted)?.id;
  };
  const notFound = (email: string | undefined) => toolError('NOT_FOUND', `No contact with the address ${email}`);

  server.registerTool(
    'find_contact',
    {
      title: 'Look up a contact',
      description:
        'A contact by id or email address: subscription, attributes (data), dates, and its 10 most recent events.',
      inputSchema: who,
    },
    async ({ id, email }) => {
      if (!id && !email) return toolError('VALIDATION_ERROR', 'Give id or email');
      try {
        const found = await resolveId(id, email);
        if (!found) return notFound(email);
        const contact = unwrap(await mailroom.GET('/contacts/{id}', { params: { path: { id: found } } }));
        const events = unwrap(await mailroom.GET('/events', { params: { query: { limit: 10, contactId: found } } }));
        return toolResult({
          ...contact,
          recentEvents: events.items.map((e) => ({ name: e.name, at: e.createdAt, data: e.data })),
        });
      } catch (err) {
        return errorResult(err);
      }
    },
  );

  server.registerTool(
    'update_contact',
    {
      title: 'Update a contact',
      description:
        "Changes a contact's subscription and/or merges attributes into its data (a key set to null is removed). " +
        'Finds the contact by id or email address; it must exist (send_email and track_event create contacts).',
      inputSchema: {
        ...who,
        subscribed: z
          .boolean()
          .optional()
          .describe('subscribed to marketing email (campaigns reach only subscribed contacts)'),
        data: contactDataSchema.optional(),
      },
    },
    async ({ id, email, subscribed, data }) => {
      if (!id && !email) return toolError('VALIDATION_ERROR', 'Give id or email');
      if (subscribed === undefined && data === undefined)
        return toolError('VALIDATION_ERROR', 'Give subscribed and/or data to change');
      try {
        const found = await resolveId(id, email);
        if (!found) return notFound(email);
        return toolResult(
          unwrap(
            await mailroom.PATCH('/contacts/{id}', { params: { path: { id: found } }, body: { subscribed, data } }),
          ),
        );
      } catch (err) {
        return errorResult(err);
      }
    },
  );
}
