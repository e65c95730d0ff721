/**
 * Queues closed while their shared connection is still connecting, then the connection disconnected by its owner:
 * BullMQ's start of each queue rejects after the close, and that must not be an unhandled `error`.
 */
import IORedis from 'ioredis';
import { createQueues } from './create';

test('closeAll while the connection is still connecting, then the owner disconnects: no unhandled error', async () => {
  const connection = new IORedis(process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379', {
    maxRetriesPerRequest: null,
    enableOfflineQueue: false,
  });
  connection.on('error', () => undefined);
  const unhandled: unknown[] = [];
  const onRejection = (err: unknown) => unhandled.push(err);
  process.on('unhandledRejection', onRejection);
  try {
    const queues = createQueues({ queuePrefix: `create-test-${process.pid}` }, connection);
    expect(connection.status).not.toBe('ready');
    await queues.closeAll();
    connection.disconnect();
    await new Promise<void>((r) => (connection.status === 'end' ? r() : connection.once('end', () => r())));
    // Let the queues' starts settle (they reject now that the connection ended).
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
    expect(unhandled).toEqual([]);
    // What BullMQ does when such a start fails after the close (`initializing.catch(err => this.emit('error', err))`
    // on the queue's connection, whose listeners the close removed): it must not throw.
    for (const key of ['send', 'webhook'] as const) {
      expect(() =>
        queues[key]['connection'].emit(
          'error',
          new Error("Stream isn't writeable and enableOfflineQueue options is false"),
        ),
      ).not.toThrow();
    }
  } finally {
    process.off('unhandledRejection', onRejection);
  }
});
