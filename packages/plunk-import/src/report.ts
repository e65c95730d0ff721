/**
 * What a Plunk import reports (the kinds it imports, their counts, refused rows and notes) and its options.
 *
 * @module
 */

/** The kinds reported, in import order. */
export const PLUNK_IMPORT_KINDS = [
  'projects',
  'keys',
  'domains',
  'contacts',
  'templates',
  'segments',
  'segmentMembers',
  'campaigns',
  'campaignEmails',
  'workflows',
  'steps',
  'transitions',
  'events',
] as const;
export type PlunkImportKind = (typeof PLUNK_IMPORT_KINDS)[number];

/** Counts of one kind: `imported` written by this run, `skipped` already here (an earlier run), `unmapped` refused. */
export interface KindTally {
  read: number;
  imported: number;
  skipped: number;
  unmapped: number;
}

/** A refused row. */
export interface UnmappedRow {
  kind: PlunkImportKind;
  plunkId: string;
  reason: string;
}

/** What a run did (the CLI prints it as JSON). */
export interface PlunkImportReport {
  durationMs: number;
  kinds: Record<PlunkImportKind, KindTally>;
  unmapped: { total: number; first: UnmappedRow[] };
  /** Changes made on the way (a workflow imported disabled, a domain kept unverified…). */
  notes: { total: number; first: string[] };
}

/** Options of {@link importFromPlunk}. */
export interface PlunkImportOptions {
  /** Rows per read and per INSERT (default 2000). */
  batchSize?: number;
  /** How many refused rows and notes the report lists (default 100; all are counted). */
  maxListed?: number;
  /** Told after each batch: the kind, rows read so far, and the kind's total in Plunk. */
  onProgress?: (kind: PlunkImportKind, done: number, total: number) => void;
}

/** Why an INSERT that skipped a row means a different row already holds its unique key. */
