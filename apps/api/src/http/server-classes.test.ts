import http, { type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { expressServerOptions, type NodeHttpClasses } from './server-classes';

describe('expressServerOptions', () => {
  let server: Server;
  let base: string;
  /** The prototypes of each request and response as the server made them, before Express saw them. */
  const born: { req: object | null; res: object | null }[] = [];
  const app = express();
  app.use(express.json());
  app.get('/hello', (req, res) => {
    res
      .status(201)
      .set('x-got', req.get('x-sent') ?? '')
      .json({ ip: req.ip, query: req.query.q });
  });
  app.post('/echo', (req: express.Request<unknown, unknown, { n: number }>, res) => {
    res.json({ n: req.body.n + 1 });
  });
  app.get('/fail', () => {
    throw new Error('boom');
  });

  beforeAll(async () => {
    server = http.createServer(expressServerOptions(app), app);
    server.prependListener('request', (req: IncomingMessage, res: http.ServerResponse) => {
      born.push({ req: Object.getPrototypeOf(req) as object, res: Object.getPrototypeOf(res) as object });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it("builds requests and responses that already have the app's prototypes, so Express changes none", async () => {
    born.length = 0;
    for (let i = 0; i < 3; i++) {
      const r = await fetch(`${base}/hello?q=${i}`, { headers: { 'x-sent': `v${i}` } });
      expect(r.status).toBe(201);
      expect(r.headers.get('x-got')).toBe(`v${i}`);
      expect(await r.json()).toEqual({ ip: '127.0.0.1', query: String(i) });
    }
    expect(born).toHaveLength(3);
    for (const b of born) {
      expect(b.req).toBe(app.request);
      expect(b.res).toBe(app.response);
    }
  });

  it("keeps them Node's own request and response: instanceof, bodies, errors and keep-alive work as before", async () => {
    born.length = 0;
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const post = (n: number) =>
      new Promise<{ status: number; body: string; reused: boolean }>((resolve, reject) => {
        const req = http.request(
          `${base}/echo`,
          { method: 'POST', agent, headers: { 'content-type': 'application/json' } },
          (res) => {
            let body = '';
            res.setEncoding('utf8');
            res.on('data', (c: string) => (body += c));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body, reused: req.reusedSocket }));
          },
        );
        req.on('error', reject);
        req.end(JSON.stringify({ n }));
      });
    const first = await post(1);
    const second = await post(41);
    agent.destroy();
    expect(first).toEqual({ status: 200, body: '{"n":2}', reused: false });
    expect(second).toEqual({ status: 200, body: '{"n":42}', reused: true });
    const failed = await fetch(`${base}/fail`);
    expect(failed.status).toBe(500);
    expect(born).toHaveLength(3);

    let seen: { req: boolean; res: boolean } | undefined;
    const probe = http.createServer(expressServerOptions(app), (req, res) => {
      seen = { req: req instanceof http.IncomingMessage, res: res instanceof http.ServerResponse };
      res.end('ok');
    });
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const r = await fetch(`http://127.0.0.1:${(probe.address() as AddressInfo).port}/`);
    expect(await r.text()).toBe('ok');
    probe.closeAllConnections();
    await new Promise((resolve) => probe.close(resolve));
    expect(seen).toEqual({ req: true, res: true });
  });
});

describe('expressServerOptions on a Node whose constructors are classes', () => {
  it('warns and gives no options, so the server builds Node’s own objects', () => {
    class IncomingMessage {}
    class ServerResponse {}
    const warned = jest.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    try {
      const options = expressServerOptions(express(), {
        IncomingMessage,
        ServerResponse,
      } as unknown as NodeHttpClasses);
      expect(options).toEqual({});
      expect(warned).toHaveBeenCalledWith(expect.stringContaining('cannot be called as functions'));
    } finally {
      warned.mockRestore();
    }
  });
});
