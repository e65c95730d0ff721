/**
 * Where code that counts by wall-clock time (a per-minute counter, a lease) reads the time, so a test can set it
 * instead of sleeping until a minute boundary or a lease has run out.
 *
 * @module
 */

/** A source of the current time. */
export interface Clock {
  /** Milliseconds since the Unix epoch, as `Date.now()`. */
  now(): number;
}

/** The real clock (`Date.now()`): every caller's default. */
export const systemClock: Clock = { now: () => Date.now() };
