/**
 * The operator's per-project overrides of a group of service settings (campaign guardrails, data retention): the
 * same `get`/`set` for `GET/PUT /admin/projects/{id}/<group>` and the CLI, whatever the group.
 *
 * @module
 */
import { notFound, validationError, type FieldError } from '@mailroom/platform/errors';
import { type DbOrTx } from '@mailroom/db/client';

/** One group of overridable settings. `S` maps each field to its value (all numbers). */
export interface OverrideGroup<S extends { [K in keyof S]: number }> {
  /** The fields, in the order they are shown. */
  fields: readonly (keyof S & string)[];
  /** The noun of `is not a <noun> setting`. */
  noun: string;
  /** Whether `value` is valid for `field`. */
  valid: (field: keyof S & string, value: unknown) => value is number;
  /** What a valid value of `field` is (the 422 message). */
  rule: (field: keyof S & string) => string;
  /** The settings in force: the defaults with the stored overrides applied. */
  effective: (defaults: Readonly<S>, stored: Partial<Record<keyof S, number | null>>) => S;
  load: (db: DbOrTx, projectId: string) => Promise<Partial<Record<keyof S, number | null>> | undefined>;
  store: (
    db: DbOrTx,
    projectId: string,
    patch: Partial<Record<keyof S, number | null>>,
  ) => Promise<Partial<Record<keyof S, number | null>> | undefined>;
}

/** A project's view of a group: its own settings (null: the default applies), the effective ones, the defaults. */
export interface OverrideView<S> {
  projectId: string;
  overrides: Record<keyof S, number | null>;
  effective: S;
  defaults: S;
}

/** `get` and `set` of a group. Both throw {@link AppError} 404 for an unknown project; `set` 422 naming each bad field. */
export function overrideOps<S extends { [K in keyof S]: number }>(group: OverrideGroup<S>) {
  const present = (
    projectId: string,
    stored: Partial<Record<keyof S, number | null>>,
    defaults: Readonly<S>,
  ): OverrideView<S> => ({
    projectId,
    overrides: Object.fromEntries(group.fields.map((f) => [f, group.valid(f, stored[f]) ? stored[f] : null])) as Record<
      keyof S,
      number | null
    >,
    effective: group.effective(defaults, stored),
    defaults: { ...defaults },
  });
  return {
    /** The project's overrides, effective settings and defaults. */
    get: async (db: DbOrTx, defaults: Readonly<S>, projectId: string): Promise<OverrideView<S>> => {
      const stored = await group.load(db, projectId);
      if (!stored) throw notFound('Project');
      return present(projectId, stored, defaults);
    },
    /** Sets (a valid value) or clears (null) each given setting; settings left out keep their value. */
    set: async (
      db: DbOrTx,
      defaults: Readonly<S>,
      projectId: string,
      patch: Record<string, unknown>,
    ): Promise<OverrideView<S>> => {
      const errors: FieldError[] = [];
      const clean: Partial<Record<keyof S, number | null>> = {};
      for (const [field, v] of Object.entries(patch)) {
        const known = group.fields.find((f) => f === field);
        if (!known) errors.push({ field, message: `is not a ${group.noun} setting`, code: 'unrecognized_keys' });
        else if (v === null) clean[known] = null;
        else if (group.valid(known, v)) clean[known] = v;
        else if (v !== undefined) errors.push({ field, message: group.rule(known), code: 'custom' });
      }
      if (errors.length > 0) throw validationError(errors);
      const stored = await group.store(db, projectId, clean);
      if (!stored) throw notFound('Project');
      return present(projectId, stored, defaults);
    },
  };
}
