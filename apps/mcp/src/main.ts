#!/usr/bin/env node
/**
 * Entry point: serves the Mailroom MCP server over stdio (the host starts this process and speaks JSON-RPC on its
 * stdin/stdout; diagnostics go to stderr). Configured by MAILROOM_API_KEY and MAILROOM_BASE_URL.
 *
 * @module
 */
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { createMailroomClient } from '@mailroom/client/client';
import { loadMcpConfig } from './config';
import { createMailroomMcpServer, MCP_SERVER_VERSION } from './server';

async function main(): Promise<void> {
  const config = loadMcpConfig(process.env);
  const mailroom = createMailroomClient({
    apiKey: config.apiKey,
    baseUrl: config.baseUrl,
    headers: { 'User-Agent': `mailroom-mcp/${MCP_SERVER_VERSION}` },
  });
  const server = createMailroomMcpServer(mailroom);
  await server.connect(new StdioServerTransport());
  console.error(`mailroom MCP server ${MCP_SERVER_VERSION} ready (API ${config.baseUrl})`);
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
