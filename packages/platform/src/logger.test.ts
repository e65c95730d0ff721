/** `logged`: best-effort work that never rejects, and whose failure is logged at the level asked for. */
import pino from 'pino';
import { logged } from './logger';

function capture() {
  const lines: { level: number; msg: string; err?: { message: string }; jobId?: string }[] = [];
  const log = pino({ level: 'debug' }, { write: (line: string) => lines.push(JSON.parse(line)) });
  return { lines, log };
}

test('a success is passed through and logs nothing', async () => {
  const { lines, log } = capture();
  await expect(logged(Promise.resolve(42), log, 'answer')).resolves.toBe(42);
  expect(lines).toEqual([]);
});

test('a failure resolves to undefined and is logged at warn by default, with the child logger’s fields', async () => {
  const { lines, log } = capture();
  await expect(
    logged(Promise.reject(new Error('gone')), log.child({ jobId: 'j1' }), 'stale job removal'),
  ).resolves.toBe(undefined);
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatchObject({ level: 40, msg: 'stale job removal failed', jobId: 'j1', err: { message: 'gone' } });
});

test('an expected failure is logged at debug', async () => {
  const { lines, log } = capture();
  await logged(Promise.reject(new Error('no such job')), log, 'job promotion', 'debug');
  expect(lines).toMatchObject([{ level: 20, msg: 'job promotion failed' }]);
});
