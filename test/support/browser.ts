/**
 * The set-up of a browser test: the file's API ({@link useE2e}, no worker) served on a socket of this host as
 * `server.ts` serves it ({@link expressServerOptions}), and a headless Chromium driven by playwright-core
 * (`CHROMIUM_PATH`, which global setup finds or installs; `/usr/bin/chromium` otherwise). Both are closed after the
 * file.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser } from 'playwright-core';
import { expressServerOptions } from '../../apps/api/src/http/server-classes';
import { useE2e } from './e2e';
import type { TestApi } from './harness';

/** What {@link useBrowserE2e} runs; each accessor throws when asked before `beforeAll` made it. */
export interface BrowserE2e {
  readonly api: TestApi;
  readonly server: http.Server;
  /** The server's origin, `http://127.0.0.1:<port>`. */
  readonly base: string;
  readonly browser: Browser;
}

/**
 * Registers the `beforeAll` that starts the API, its server and the browser, and the `afterAll` that closes them.
 *
 * @param onServer - called with the server before it listens (say, to watch every request it answers).
 */
export function useBrowserE2e(onServer?: (server: http.Server) => void): BrowserE2e {
  const e2e = useE2e({ worker: false });
  let server: http.Server | undefined;
  let base: string | undefined;
  let browser: Browser | undefined;
  beforeAll(async () => {
    const api = e2e.api;
    server = http.createServer(expressServerOptions(api.app), api.app);
    onServer?.(server);
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    browser = await chromium.launch({
      executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
      headless: true,
      args: ['--no-sandbox'],
    });
  });
  afterAll(async () => {
    await browser?.close();
    if (server) await new Promise<void>((r) => server!.close(() => r()));
  });
  const made = <T>(value: T | undefined, what: string): T => {
    if (value === undefined) throw new Error(`useBrowserE2e: the ${what} is made in beforeAll`);
    return value;
  };
  return {
    get api() {
      return e2e.api;
    },
    get server() {
      return made(server, 'server');
    },
    get base() {
      return made(base, 'server');
    },
    get browser() {
      return made(browser, 'browser');
    },
  };
}
