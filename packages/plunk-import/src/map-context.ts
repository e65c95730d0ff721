/**
 * What the Plunk row mappers share: the context of rows already mapped (Plunk id → ours), the result type, and
 * small helpers to read a foreign row.
 *
 * @module
 */
import { plunkRowId } from './ids';

/** A mapped row, or the reason it cannot be. `note` tells of a change made on the way (reported). */
export type Mapped<T> = { ok: true; row: T; note?: string } | { ok: false; reason: string };

/** Ids of rows already mapped (Plunk id → ours), by kind; only rows that exist here are in them. */
export interface MapContext {
  project: Map<string, string>;
  template: Map<string, string>;
  segment: Map<string, string>;
  campaign: Map<string, string>;
  workflow: Map<string, string>;
  step: Map<string, string>;
  /** Plunk TRIGGER steps (not rows here: their outgoing transition is the workflow's entry). */
  triggerSteps: Set<string>;
  /** Plunk contacts that were not imported (their events, memberships and emails are refused too). */
  missingContacts: Set<string>;
}

/** A new, empty {@link MapContext}. */
export function newMapContext(): MapContext {
  return {
    project: new Map(),
    template: new Map(),
    segment: new Map(),
    campaign: new Map(),
    workflow: new Map(),
    step: new Map(),
    triggerSteps: new Set(),
    missingContacts: new Set(),
  };
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a foreign dump's row, mapped field by field
export type Row = Record<string, any>;

/** A refusal with its reason. */
export const fail = (reason: string): { ok: false; reason: string } => ({ ok: false, reason });
/** A non-blank string, else null. */
export const str = (v: unknown): string | null => (typeof v === 'string' && v.trim() !== '' ? v : null);
/** Plunk's `Json?` columns may hold any JSON; ours hold objects. A non-object value is kept under `value`. */
export const asObject = (v: unknown): Record<string, unknown> =>
  v === null || v === undefined
    ? {}
    : typeof v === 'object' && !Array.isArray(v)
      ? (v as Record<string, unknown>)
      : { value: v };
/** A loose email address shape (the address checks come after). */
export const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/** Our id of an already mapped parent row, by its Plunk id. */
export function parent(
  ctx: MapContext,
  kind: 'project' | 'template' | 'segment' | 'campaign' | 'workflow' | 'step',
  plunkId: unknown,
) {
  return typeof plunkId === 'string' ? ctx[kind].get(plunkId) : undefined;
}

/** Our id of a row's imported contact (undefined when the contact was not imported). */
export function contactRef(ctx: MapContext, r: Row): string | undefined {
  if (!r.contactId || !r.contactCreatedAt || ctx.missingContacts.has(r.contactId)) return undefined;
  return plunkRowId('contact', r.contactId, r.contactCreatedAt);
}

/**
 * A row's id field (`id` by default) as the string every mapped and every returned row has there (a UUID).
 *
 * @throws Error when the field is not a string (a mapper bug).
 */
export function idOf(row: Record<string, unknown>, field = 'id'): string {
  const v = row[field];
  if (typeof v !== 'string') throw new Error(`row without a string ${field}`);
  return v;
}
