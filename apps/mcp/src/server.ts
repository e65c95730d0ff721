/**
 * The Mailroom MCP server: the tools an agent uses for everyday email tasks, each one or a few calls of the typed
 * client (no HTTP of its own).
 *
 * @module
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { MailroomClient } from '@mailroom/client/client';
import { registerAudienceTools } from './tools/audiences';
import { registerContactTools } from './tools/contacts';
import { registerEmailTools } from './tools/emails';
import { registerEventTools } from './tools/events';

/** This server's version, as it announces itself to the host. */
export const MCP_SERVER_VERSION = '0.1.0';

/** Creates the server with every tool registered; connect it to a transport to serve. */
export function createMailroomMcpServer(mailroom: MailroomClient): McpServer {
  const server = new McpServer(
    { name: 'mailroom', version: MCP_SERVER_VERSION },
    {
      instructions:
        'Mailroom sends email for this project. send_email sends transactional mail at once; campaigns go to many people: ' +
        'draft them with draft_campaign and never call send_campaign without the user explicitly confirming.',
    },
  );
  registerEmailTools(server, mailroom);
  registerContactTools(server, mailroom);
  registerAudienceTools(server, mailroom);
  registerEventTools(server, mailroom);
  return server;
}
