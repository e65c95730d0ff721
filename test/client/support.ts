/**
 * The API of a test file served on a loopback port (the typed client speaks real HTTP through `fetch`), with a
 * DNS server of the test's own (address checks and domain verification ask it, never the network).
 */
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { startDnsServer, type TestDnsServer } from '../support/dns-server';
import { createTestProject, startTestApi, testConfig, type TestApi, type TestProject } from '../support/harness';

export interface ServedApi {
  api: TestApi;
  dns: TestDnsServer;
  /** `http://127.0.0.1:<port>` */
  baseUrl: string;
  project: TestProject;
  close(): Promise<void>;
}

/** Starts the API on an ephemeral loopback port, with one project. */
export async function serveApi(env: Record<string, string> = {}): Promise<ServedApi> {
  const dns = await startDnsServer({
    'acme.test': { MX: [{ exchange: 'mx.acme.test', priority: 10 }], A: ['192.0.2.10'] },
  });
  const api = await startTestApi(
    testConfig({
      DNS_SERVERS: dns.server,
      DNS_TIMEOUT_MS: '300',
      DNS_TRIES: '1',
      DOMAIN_IDENTITY_PROVIDER: 'local',
      ...env,
    }),
  );
  const server: Server = await new Promise((resolve) => {
    const s = api.app.listen(0, '127.0.0.1', () => resolve(s));
  });
  const { port } = server.address() as AddressInfo;
  const project = await createTestProject(api.database);
  return {
    api,
    dns,
    baseUrl: `http://127.0.0.1:${port}`,
    project,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await api.close();
      await dns.close();
    },
  };
}
