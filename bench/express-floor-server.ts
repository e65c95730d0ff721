/**
 * The Express floor of `npm run bench -- api` (`BENCH_API_EXPRESS=1`): the bare ceiling's work
 * (`bench/ceiling-server.ts`: the one unavoidable statement and, for send, one BullMQ add) behind Express 5 and
 * `express.json()` instead of node:http and a hand-read body. Run beside the ceiling and the API, it splits the gap
 * between them into what the framework the API is built on costs and what the API's own layers cost. Served as the
 * API serves its app: requests and responses born with the app's prototypes (`apps/api/src/http/server-classes.ts`).
 *
 * Environment as for the ceiling.
 *
 * @module
 */
import http from 'node:http';
import express from 'express';
import { expressServerOptions } from '../apps/api/src/http/server-classes';
import { handlers } from './ceiling-server';

const app = express();
app.disable('x-powered-by');
app.get('/health/ready', (_req, res) => {
  res.json({ ok: true });
});
for (const [path, handle] of Object.entries(handlers.routes)) {
  app.post(path, express.json({ limit: '100kb' }), (req, res, next) => {
    const header = req.headers['x-project-id'];
    handle(req.body as Record<string, unknown>, typeof header === 'string' ? header : handlers.defaultProjectId).then(
      (data) => res.json({ success: true, data }),
      next,
    );
  });
}
const server = http.createServer(expressServerOptions(app), app).listen(Number(process.env.PORT), '127.0.0.1');
process.on('SIGTERM', () => {
  server.close();
  void handlers.close().finally(() => process.exit(0));
});
