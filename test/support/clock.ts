/**
 * A clock a test sets ({@link Clock}): for code that counts per minute or by lease, instead of sleeping until a
 * minute boundary or a lease's end.
 */
import type { Clock } from '@mailroom/platform/clock';

/** A clock that stands still until told to move. */
export class TestClock implements Clock {
  private ms: number;

  /** @param ms - the time it shows (ms since the epoch); default: the middle of the real current minute. */
  constructor(ms = Math.floor(Date.now() / 60_000) * 60_000 + 30_000) {
    this.ms = ms;
  }

  now(): number {
    return this.ms;
  }

  /** Moves the clock on by `ms`. */
  advance(ms: number): void {
    this.ms += ms;
  }
}
