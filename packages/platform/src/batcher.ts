/**
 * Folds the single-row statements of concurrent callers into one statement per batch: the send jobs' claims and
 * finishes (`@mailroom/sending/claim`), the API's `/v1/track` writes (`@mailroom/contacts/queries/track-batch`).
 *
 * Measured with `npm run bench -- worker` (docs/decisions/0001-batched-claims-and-finishes.md): every `sent` finish
 * updates the same `reputation_counts` row (project, hour, domain), so concurrent finishes queued on that row lock one
 * behind the other, each waiting for the previous one's commit to reach the disk; and every claim and finish paid its
 * own WAL flush. A batch takes the row lock and the flush once for all its rows.
 *
 * No timer: an item runs at once while fewer than `maxInFlight` batches are running; otherwise it waits and goes
 * with everything else that arrived meanwhile (at most `maxBatch`) as soon as one returns. At a low rate every item
 * therefore runs alone, through the single-row statement, exactly as without a batcher; under load the batches
 * grow with the time a statement takes.
 *
 * With `sameTurn`, items are first gathered until the end of the event loop's turn (one `setImmediate`): callers
 * woken together (say, the requests of one batched write, resumed in one microtask drain) go in one batch even
 * when a slot is free, instead of the first alone and the rest after it.
 *
 * A batch that fails as a whole (a deadlock, one row's data refused, a lost connection) changes nothing in
 * Postgres: each of its items is then run on its own, so one bad item cannot take the others' outcomes with it,
 * and each caller gets its own answer or error.
 *
 * @module
 */

/** How a {@link Batcher} groups items. */
export interface BatcherOptions {
  /** Most items in one batch (≥ 1). */
  maxBatch: number;
  /** Most batches (or single items) running at once (≥ 1). */
  maxInFlight: number;
  /** Told the size of each batch (or single item, 1) as it starts. */
  observe?: (size: number) => void;
  /**
   * Whether the items of a batch that failed with `err` are run again one by one (default: always). Say no for
   * errors after which the batch's outcome is unknown, such as a connection dropped while its commit was on the
   * wire: running its items again could write them twice, so each caller gets `err` instead.
   */
  retryAlone?: (err: unknown) => boolean;
  /**
   * Gathers the items given in one turn of the event loop before starting any (see the module notes): at most one
   * turn later than without, and one batch for callers woken together. Default false.
   */
  sameTurn?: boolean;
}

interface Waiting<I, O> {
  item: I;
  resolve: (o: O) => void;
  reject: (err: unknown) => void;
}

/** Runs items one by one or in batches (see the module notes). */
export class Batcher<I, O> {
  private readonly waiting: Waiting<I, O>[] = [];
  private inFlight = 0;
  private gathering = false;

  /**
   * @param runBatch - runs ≥ 2 items in one go; returns one output per item, in the items' order. Must change
   *   nothing when it throws (one statement), since every item is then run again on its own.
   * @param runOne - runs one item.
   */
  constructor(
    private readonly runBatch: (items: I[]) => Promise<O[]>,
    private readonly runOne: (item: I) => Promise<O>,
    private readonly options: BatcherOptions,
  ) {}

  /**
   * Whether an item given now would wait for a running batch (as many running as allowed, or items already
   * waiting) instead of starting at once.
   */
  get busy(): boolean {
    return this.inFlight >= this.options.maxInFlight || this.waiting.length > 0;
  }

  /** Runs `item` alone or with others. @throws what `runOne` throws for it (after a failed batch, on its own). */
  run(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.waiting.push({ item, resolve, reject });
      if (!this.options.sameTurn) return this.pump();
      if (this.gathering) return;
      this.gathering = true;
      setImmediate(() => {
        this.gathering = false;
        this.pump();
      });
    });
  }

  private pump(): void {
    while (this.inFlight < this.options.maxInFlight && this.waiting.length > 0) {
      const batch = this.waiting.splice(0, Math.max(1, this.options.maxBatch || 1));
      this.inFlight++;
      this.options.observe?.(batch.length);
      void this.execute(batch).finally(() => {
        this.inFlight--;
        this.pump();
      });
    }
  }

  private async execute(batch: Waiting<I, O>[]): Promise<void> {
    if (batch.length > 1) {
      let outputs: O[] | undefined;
      try {
        outputs = await this.runBatch(batch.map((w) => w.item));
      } catch (err) {
        if (this.options.retryAlone && !this.options.retryAlone(err)) {
          for (const w of batch) w.reject(err);
          return;
        }
        // Nothing of the batch was written: each item on its own below, each with its own answer or error.
      }
      if (outputs) {
        batch.forEach((w, i) => w.resolve(outputs[i]));
        return;
      }
    }
    await Promise.all(
      batch.map(async (w) => {
        try {
          w.resolve(await this.runOne(w.item));
        } catch (err) {
          w.reject(err);
        }
      }),
    );
  }
}
