/** The batcher's grouping and its fallback after a failed batch (plain functions: no service involved). */
import { Batcher } from './batcher';

/** A batcher over numbers whose batch fails with `batchError` when given; records what ran. */
function setup(batchError?: Error, retryAlone?: (err: unknown) => boolean) {
  const ran = { batches: [] as number[][], alone: [] as number[] };
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const batcher = new Batcher<number, number>(
    async (items) => {
      ran.batches.push(items);
      if (batchError) throw batchError;
      return items.map((i) => i * 10);
    },
    async (item) => {
      if (item === 0) await gate; // the first item holds the only slot while the others queue
      ran.alone.push(item);
      return item * 10;
    },
    { maxBatch: 10, maxInFlight: 1, ...(retryAlone ? { retryAlone } : {}) },
  );
  const results = [0, 1, 2, 3].map((i) =>
    batcher.run(i).then(
      (v) => ({ v }),
      (e: Error) => ({ e: e.message }),
    ),
  );
  release();
  return { ran, results: Promise.all(results) };
}

test('items that arrive while the slot is busy go in one batch', async () => {
  const { ran, results } = setup();
  expect(await results).toEqual([{ v: 0 }, { v: 10 }, { v: 20 }, { v: 30 }]);
  expect(ran.batches).toEqual([[1, 2, 3]]);
  expect(ran.alone).toEqual([0]);
});

test('a failed batch runs its items again one by one by default', async () => {
  const { ran, results } = setup(new Error('deadlock detected'));
  expect(await results).toEqual([{ v: 0 }, { v: 10 }, { v: 20 }, { v: 30 }]);
  expect(ran.alone.sort()).toEqual([0, 1, 2, 3]);
});

test('retryAlone false: every item of the batch gets the error and nothing runs again', async () => {
  const { ran, results } = setup(
    new Error('Connection terminated unexpectedly'),
    (err) => !/terminated/.test(String(err)),
  );
  expect(await results).toEqual([
    { v: 0 },
    { e: 'Connection terminated unexpectedly' },
    { e: 'Connection terminated unexpectedly' },
    { e: 'Connection terminated unexpectedly' },
  ]);
  expect(ran.alone).toEqual([0]);
});

test("sameTurn: items given in one turn go in one batch although a slot was free; a later turn's item alone", async () => {
  const ran: number[][] = [];
  const batcher = new Batcher<number, number>(
    async (items) => (ran.push(items), items.map((i) => i * 10)),
    async (item) => (ran.push([item]), item * 10),
    { maxBatch: 3, maxInFlight: 2, sameTurn: true },
  );
  expect(await Promise.all([1, 2, 3, 4].map((i) => batcher.run(i)))).toEqual([10, 20, 30, 40]);
  // Both slots free at the end of the turn: the first 3, and the rest at once in the other slot.
  expect(ran).toEqual([[1, 2, 3], [4]]);
  expect(await batcher.run(5)).toBe(50);
  expect(ran[2]).toEqual([5]);
});
