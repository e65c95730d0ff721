import express from 'express';
import pino from 'pino';
import request from 'supertest';
import type { AuthContext } from './context';
import { Type } from '@sinclair/typebox';
import type { Database } from '@mailroom/db/client';
import { requestId } from './request-id';
import { mountRoutes, route, type AnyRoute } from './route';

/** An app behind `requestId`, its log lines (parsed), and what its routes saw. */
function harness() {
  const lines: Record<string, unknown>[] = [];
  const logger = pino(
    { level: 'info', base: undefined },
    { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) },
  );
  const childrenMade = jest.spyOn(logger, 'child');
  const recorded: { status: number; seconds: number }[] = [];
  const app = express();
  app.use(requestId(logger, (_req, res, seconds) => recorded.push({ status: res.statusCode, seconds })));
  app.get('/quiet', (_req, res) => {
    res.json({ id: (res.locals as { requestId: string }).requestId });
  });
  app.get('/chatty', (_req, res) => {
    const locals = res.locals as { log: pino.Logger; auth?: AuthContext };
    locals.log.info('before auth');
    const before = locals.log;
    locals.auth = { projectId: 'p-1', mode: 'test' } as AuthContext;
    locals.log.warn('after auth');
    locals.log.warn('again');
    res.status(202).json({ sameChildBeforeAuth: before === locals.log });
  });
  return { app, lines, childrenMade, recorded };
}

describe('requestId', () => {
  it('answers with the caller’s well-formed X-Request-Id, else a new UUID, and logs one access line per request', async () => {
    const { app, lines, childrenMade, recorded } = harness();
    const kept = await request(app).get('/quiet').set('X-Request-Id', 'client-req-123456');
    expect(kept.headers['x-request-id']).toBe('client-req-123456');
    expect(kept.body).toEqual({ id: 'client-req-123456' });
    const made = await request(app).get('/quiet').set('X-Request-Id', 'bad id');
    expect(made.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(lines).toEqual([
      expect.objectContaining({
        msg: 'request',
        requestId: 'client-req-123456',
        method: 'GET',
        path: '/quiet',
        status: 200,
      }),
      expect.objectContaining({ msg: 'request', requestId: made.headers['x-request-id'], status: 200 }),
    ]);
    // No child logger for a request that logs nothing but its access line.
    expect(childrenMade).not.toHaveBeenCalled();
    expect(recorded).toEqual([
      { status: 200, seconds: expect.any(Number) },
      { status: 200, seconds: expect.any(Number) },
    ]);
  });

  it('binds `res.locals.log` to the request id, and to the project and key mode once authenticated', async () => {
    const { app, lines, childrenMade } = harness();
    const res = await request(app).get('/chatty').set('X-Request-Id', 'rid-chatty-1');
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ sameChildBeforeAuth: false });
    expect(lines.map(({ msg, requestId, projectId, keyMode }) => ({ msg, requestId, projectId, keyMode }))).toEqual([
      { msg: 'before auth', requestId: 'rid-chatty-1', projectId: undefined, keyMode: undefined },
      { msg: 'after auth', requestId: 'rid-chatty-1', projectId: 'p-1', keyMode: 'test' },
      { msg: 'again', requestId: 'rid-chatty-1', projectId: 'p-1', keyMode: 'test' },
      { msg: 'request', requestId: 'rid-chatty-1', projectId: 'p-1', keyMode: 'test' },
    ]);
    // One child before authentication, one after: not one per line.
    expect(childrenMade).toHaveBeenCalledTimes(2);
  });
});

describe('routed requests', () => {
  it('make a child logger only when their handler reads `log`, with the request id and the same db handle', async () => {
    const { app, lines, childrenMade } = harness();
    const database = { db: { handle: 'db' } } as unknown as Database;
    const seen: unknown[] = [];
    const routes = [
      route({
        method: 'get',
        path: '/silent',
        operationId: 'silent',
        summary: 'logs nothing',
        tag: 'test',
        auth: 'none',
        response: Type.Object({}),
        status: 200,
        errors: [],
        handler: async ({ db, requestId: id }) => {
          seen.push(db, id);
          return { data: {} };
        },
      }),
      route({
        method: 'post',
        path: '/noisy',
        operationId: 'noisy',
        summary: 'logs one line',
        tag: 'test',
        auth: 'none',
        response: Type.Object({}),
        status: 201,
        errors: [],
        handler: async ({ log }) => {
          log.warn('from the handler');
          return { data: {} };
        },
      }),
    ] as unknown as AnyRoute[];
    const router = express.Router();
    mountRoutes(router, routes, { secret: [], sending: [], anyKey: [], admin: [] }, database);
    app.use(router);

    expect((await request(app).get('/silent').set('X-Request-Id', 'rid-silent-1')).status).toBe(200);
    expect(seen).toEqual([database.db, 'rid-silent-1']);
    expect(childrenMade).not.toHaveBeenCalled();
    expect((await request(app).post('/noisy').set('X-Request-Id', 'rid-noisy-1')).status).toBe(201);
    expect(childrenMade).toHaveBeenCalledTimes(1);
    expect(lines.filter((l) => l.msg === 'from the handler')).toEqual([
      expect.objectContaining({ requestId: 'rid-noisy-1', level: 40 }),
    ]);
  });
});
