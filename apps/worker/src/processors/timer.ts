/**
 * A periodic pass that one worker process at a time runs: every process ticks, a Redis lock (SET NX PX) picks
 * the one that works; a pass still running skips the next tick. Used by the reconciler and the segment refresher.
 *
 * @module
 */
import type { Redis } from 'ioredis';
import type { Logger } from '@mailroom/core';

/** Options of {@link startLockedTimer}. */
export interface LockedTimer {
  redis: Redis;
  /** Redis key of the lock. */
  lockKey: string;
  /** Tick period (ms). */
  intervalMs: number;
  /** Lock lifetime (ms). */
  lockMs: number;
  /** Release the lock when the pass ends (else it expires, which spaces passes across processes). */
  release: boolean;
  logger: Logger;
  /** Name in the log line of a failed pass. */
  name: string;
}

/** Starts the timer. @returns `stop()`, which waits for a running pass to end. */
export function startLockedTimer(opts: LockedTimer, pass: () => Promise<unknown>): { stop: () => Promise<void> } {
  let running: Promise<unknown> = Promise.resolve();
  let stopped = false;
  let busy = false;
  const tick = async () => {
    if ((await opts.redis.set(opts.lockKey, String(process.pid), 'PX', opts.lockMs, 'NX')) !== 'OK') return;
    try {
      await pass();
    } finally {
      if (opts.release) await opts.redis.del(opts.lockKey);
    }
  };
  const timer = setInterval(() => {
    if (stopped || busy) return;
    busy = true;
    running = tick()
      .catch((err) => opts.logger.error({ err }, `${opts.name} pass failed`))
      .finally(() => (busy = false));
  }, opts.intervalMs);
  timer.unref();
  return {
    stop: async () => {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}
