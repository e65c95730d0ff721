/**
 * The queue prefixes of one bench run. Each names the run (its process id and start time) and is recorded here, so
 * the run deletes the Redis keys of its own prefixes when it ends (`bench/run.ts`) and never another run's.
 *
 * @module
 */

const RUN = `${process.pid}-${Date.now()}`;
const made = new Set<string>();

/**
 * A fresh queue prefix of this run: `{bench-<name>-<pid>-<start ms>-<n>}` (a hash tag, so a Redis Cluster keeps a
 * queue's keys in one slot), recorded for {@link benchQueuePrefixes}.
 *
 * @param name - what the prefix is for (`worker1`, `ceiling1`, `delivery`, …), shown in the keys.
 */
export function benchQueuePrefix(name: string): string {
  const prefix = `{bench-${name}-${RUN}-${made.size + 1}}`;
  made.add(prefix);
  return prefix;
}

/** Every prefix {@link benchQueuePrefix} made in this run. */
export function benchQueuePrefixes(): string[] {
  return [...made];
}
