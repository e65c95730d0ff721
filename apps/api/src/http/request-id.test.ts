import express from 'express';
import pino from 'pino';
import request from 'supertest';
import type { AuthContext } from './context';
import { requestId } from './request-id';

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
