/**
 * Request and job-payload validation. A TypeBox schema is at once the ajv runtime schema, the TypeScript type
 * (`Static<typeof S>`) and the OpenAPI component, so the docs cannot drift from what is enforced.
 *
 * ajv errors are translated into the spec's `errors[]` items: `{ field: 'to.0.email', message, code }`.
 *
 * @module
 */
import Ajv, { type ErrorObject, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { addressProblem, MAILBOX_MAX_LENGTH, parseMailbox } from './address';
import { AppError, ErrorCode, type FieldError, type FieldErrorCode } from './errors';
import { findJsonProblem } from './json-guard';
import { findReservedKeys } from './reserved-keys';

/**
 * `format: "email"`: ajv-formats' syntax and the RFC 5321 size limits, checked on the address's ASCII form (an
 * internationalised domain in punycode), with ASCII-only local parts ({@link addressProblem}), so every schema
 * that takes an address (send `to`, contacts, track, suppressions, import rows…) refuses an address a mail server
 * or SES would refuse, once, here. Surrounding whitespace is not part of the address: it is accepted here and cut
 * off by the {@link TRIM_KEYWORD} keyword that every address schema carries.
 */
function isEmail(s: string): boolean {
  return addressProblem(s.trim()) === undefined;
}

/**
 * `format: "mailbox"`: an address or an RFC 5322 mailbox string with a display name (`Acme <hello@acme.com>`),
 * see {@link parseMailbox}. Strings longer than {@link MAILBOX_MAX_LENGTH} are refused before they are parsed.
 */
function isMailbox(s: string): boolean {
  return s.length <= MAILBOX_MAX_LENGTH && parseMailbox(s).ok;
}

/**
 * Schema keyword (written as an OpenAPI extension, so the document stays valid) that trims a string value in
 * place once the value is validated: `{ "x-trim": true }`. Every address field carries it ({@link addressString},
 * {@link MailboxString}), so `"  Ann@Example.COM "` is accepted and every handler, import row and job payload
 * after validation sees `"Ann@Example.COM"`: addresses are trimmed once, here. (ajv runs `format` on the value as
 * given, so the `email` and `mailbox` formats read it trimmed themselves.) A string that is the whole body cannot
 * be replaced in place and is left as it is.
 */
export const TRIM_KEYWORD = 'x-trim';

/**
 * A string schema of format `email` (or `mailbox`) that accepts and cuts off surrounding whitespace
 * ({@link TRIM_KEYWORD}). Use it for every field that takes an address.
 */
export function addressString(format: 'email' | 'mailbox', options: Parameters<typeof Type.String>[0] = {}) {
  return Type.String({ ...options, format, [TRIM_KEYWORD]: true });
}

/**
 * A sender or reply-to given as one string: a bare address or a mailbox with a display name
 * (`"Acme <hello@acme.com>"`, Plunk v2's form). Read it with `parseMailbox` / `senderFromMailbox` (address.ts):
 * the display name maps onto the resource's name field (`fromName`, `name`), and an explicit name field wins.
 */
export const MailboxString = Type.String({
  [TRIM_KEYWORD]: true,
  format: 'mailbox',
  maxLength: MAILBOX_MAX_LENGTH,
  description:
    'an email address, or a mailbox with a display name such as "Acme <hello@acme.com>" (RFC 5322); the display name is used ' +
    'as the sender name unless a name field is given. Internationalised domains are accepted and stored in punycode; the part ' +
    'before the @ must be ASCII',
});

function makeAjv(coerceTypes: boolean): Ajv {
  // `verbose` keeps the failing value on each error, so a too-long address can be told from bad syntax.
  const ajv = new Ajv({ allErrors: true, strict: false, coerceTypes, useDefaults: coerceTypes, verbose: true });
  addFormats(ajv);
  ajv.addFormat('email', { type: 'string', validate: isEmail });
  ajv.addFormat('mailbox', { type: 'string', validate: isMailbox });
  ajv.addKeyword({
    keyword: TRIM_KEYWORD,
    type: 'string',
    schemaType: 'boolean',
    modifying: true,
    errors: false,
    validate: (
      on: boolean,
      data: string,
      _schema?: unknown,
      at?: { parentData?: unknown; parentDataProperty?: string | number },
    ) => {
      if (on && at?.parentData !== undefined && at.parentDataProperty !== undefined) {
        (at.parentData as Record<string | number, unknown>)[at.parentDataProperty] = data.trim();
      }
      return true;
    },
  });
  return ajv;
}

const bodyAjv = makeAjv(false);
// Query strings and path parameters arrive as text: coerce "20" → 20 and "true" → true.
const paramAjv = makeAjv(true);

/** Schemas that others reference by `$id` ({@link registerSchema}). */
const shared = new Map<string, TSchema>();

/**
 * Makes a schema with an `$id` referable from every validator (`{ $ref: "<$id>" }`, e.g. a recursive schema that
 * several request fields share). Registering the same `$id` again is a no-op.
 *
 * @throws Error when the schema has no `$id`.
 */
export function registerSchema(schema: TSchema): void {
  const id = schema.$id;
  if (!id) throw new Error('registerSchema needs a schema with an $id');
  if (shared.has(id)) return;
  shared.set(id, schema);
  bodyAjv.addSchema(schema);
  paramAjv.addSchema(schema);
}

/** The schemas registered with {@link registerSchema}, by `$id` (the OpenAPI document's shared components). */
export function registeredSchemas(): ReadonlyMap<string, TSchema> {
  return shared;
}

const keywordCode: Record<string, FieldErrorCode> = {
  type: 'invalid_type',
  required: 'invalid_type',
  format: 'invalid_string',
  pattern: 'invalid_string',
  enum: 'invalid_enum_value',
  const: 'invalid_enum_value',
  minLength: 'too_small',
  minimum: 'too_small',
  exclusiveMinimum: 'too_small',
  minItems: 'too_small',
  minProperties: 'too_small',
  maxLength: 'too_big',
  maximum: 'too_big',
  exclusiveMaximum: 'too_big',
  maxItems: 'too_big',
  maxProperties: 'too_big',
  additionalProperties: 'unrecognized_keys',
};

function pointerToPath(pointer: string): string {
  return pointer
    .split('/')
    .slice(1)
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
    .join('.');
}

function join(base: string, key: string): string {
  return base ? `${base}.${key}` : key;
}

function toFieldError(e: ErrorObject, root: string): FieldError {
  const path = pointerToPath(e.instancePath);
  const code = keywordCode[e.keyword] ?? 'custom';
  const p = e.params as Record<string, unknown>;
  if (e.keyword === 'required') {
    return { field: join(join(root, path), String(p.missingProperty)), message: 'is required', code };
  }
  if (e.keyword === 'additionalProperties') {
    return { field: join(join(root, path), String(p.additionalProperty)), message: 'is not a recognized field', code };
  }
  const field = join(root, path) || root || '(root)';
  if (e.keyword === 'enum') {
    return { field, message: `must be one of: ${(p.allowedValues as unknown[]).join(', ')}`, code };
  }
  if (e.keyword === 'format' && typeof e.data === 'string' && (p.format === 'email' || p.format === 'mailbox')) {
    const problem =
      p.format === 'email'
        ? addressProblem(e.data.trim())
        : (() => {
            const r = parseMailbox(e.data);
            return r.ok ? undefined : r.reason;
          })();
    const message = problem ?? `must be a valid ${String(p.format)}`;
    return { field, message, code: /at most \d+/.test(message) ? 'too_big' : code };
  }
  if (e.keyword === 'format') return { field, message: `must be a valid ${String(p.format)}`, code };
  return { field, message: e.message ?? 'is invalid', code };
}

/**
 * Collapses the per-branch noise of `anyOf` failures: when exactly one branch has the right JSON type at the
 * failing path, its own errors are reported (e.g. `to.email must be a valid email`); otherwise one
 * `invalid_type` error describes the accepted shapes.
 */
function simplify(all: ErrorObject[], schemaDescription: (schemaPath: string) => string | undefined): ErrorObject[] {
  // An `if`/`then`/`else` failure is told by the errors of the branch that applied; its own error adds nothing.
  const errors = all.filter((e) => e.keyword !== 'if');
  const anyOfs = errors.filter((e) => e.keyword === 'anyOf');
  if (anyOfs.length === 0) return errors;
  // Innermost anyOf failures first, so nested unions are resolved before their parents.
  anyOfs.sort((a, b) => b.schemaPath.length - a.schemaPath.length);
  let remaining = errors;
  for (const union of anyOfs) {
    if (!remaining.includes(union)) continue;
    const prefix = union.schemaPath.replace(/\/anyOf$/, '/anyOf/');
    const inside = remaining.filter((e) => e !== union && e.schemaPath.startsWith(prefix));
    const byBranch = new Map<string, ErrorObject[]>();
    for (const e of inside) {
      const branch = e.schemaPath.slice(prefix.length).split('/')[0];
      byBranch.set(branch, [...(byBranch.get(branch) ?? []), e]);
    }
    // Errors inside a `$ref` branch have paths of the referenced schema: they are the run of errors ajv reported
    // just before the union about its value, whose path is not the union's.
    const refBranch = Array.isArray(union.schema)
      ? (union.schema as unknown[]).findIndex((b) => typeof b === 'object' && b !== null && '$ref' in b)
      : -1;
    if (refBranch >= 0) {
      const within = (e: ErrorObject) =>
        e.instancePath === union.instancePath || e.instancePath.startsWith(`${union.instancePath}/`);
      const through: ErrorObject[] = [];
      for (let j = remaining.indexOf(union) - 1; j >= 0 && within(remaining[j]); j--) {
        if (!remaining[j].schemaPath.startsWith(prefix)) through.unshift(remaining[j]);
      }
      inside.push(...through);
      if (through.length > 0) byBranch.set(String(refBranch), [...(byBranch.get(String(refBranch)) ?? []), ...through]);
    }
    const typeMatched = [...byBranch.values()].filter(
      (errs) => !errs.some((e) => e.keyword === 'type' && e.instancePath === union.instancePath),
    );
    const replacement: ErrorObject[] =
      typeMatched.length === 1
        ? typeMatched[0]
        : [
            {
              ...union,
              keyword: 'type',
              message:
                schemaDescription(union.schemaPath.replace(/\/anyOf$/, '')) ?? 'does not match any accepted shape',
            },
          ];
    remaining = [...remaining.filter((e) => e !== union && !inside.includes(e)), ...replacement];
  }
  return remaining;
}

function describeAt(schema: TSchema, schemaPath: string): string | undefined {
  let node: unknown = schema;
  for (const seg of schemaPath.replace(/^#\/?/, '').split('/').filter(Boolean)) {
    if (node && typeof node === 'object') node = (node as Record<string, unknown>)[seg];
  }
  const d = node && typeof node === 'object' ? (node as { description?: unknown }).description : undefined;
  return typeof d === 'string' ? `must be ${d}` : undefined;
}

/** A compiled validator: returns the typed value or throws an {@link AppError}. */
export type Validator<T> = (value: unknown) => T;

function bodyFailure(errors: FieldError[]): AppError {
  return new AppError(
    ErrorCode.VALIDATION_ERROR,
    errors.length === 1 ? `${errors[0].field}: ${errors[0].message}` : 'Request validation failed',
    { errors, suggestion: 'Correct the fields listed in error.errors and retry.' },
  );
}

function paramFailure(errors: FieldError[]): AppError {
  return new AppError(
    ErrorCode.INVALID_PARAMETERS,
    errors.length === 1 ? `${errors[0].field}: ${errors[0].message}` : 'Invalid parameters',
    { errors },
  );
}

/**
 * Compiles a request-body validator. Before the schema, the body is walked once (iteratively) by
 * {@link findJsonProblem}: U+0000 in any string or key (Postgres `text`/`jsonb` cannot store it) or nesting
 * deeper than `MAX_JSON_DEPTH` (32) is refused on its field, so nothing after validation (ajv, hashing,
 * `JSON.stringify`, the driver) ever sees a value that would fail in Postgres or exhaust the stack. Then a key
 * `__proto__`, `constructor` or `prototype` anywhere is refused on its path ({@link findReservedKeys}), so no
 * such key is stored for some routes and silently lost on others.
 *
 * @throws at call time: {@link AppError} 422 `VALIDATION_ERROR` with `errors[]`.
 */
export function bodyValidator<S extends TSchema>(schema: S): Validator<Static<S>> {
  const validate = build<Static<S>>(bodyAjv.compile(schema), schema, '', bodyFailure);
  return (value) => {
    const problem = findJsonProblem(value);
    if (problem) throw bodyFailure([problem]);
    const reserved = findReservedKeys(value);
    if (reserved.length > 0) throw bodyFailure(reserved);
    return validate(value);
  };
}

/** Plain decimal integers only: no exponent, hex, fraction, sign tricks or surrounding space (`1e2`, `0x10`, ` 5`). */
const DECIMAL_INTEGER = /^-?\d+$/;
const DECIMAL_NUMBER = /^-?\d+(?:\.\d+)?$/;

function schemaTypes(prop: unknown): string[] {
  if (!prop || typeof prop !== 'object') return [];
  const p = prop as { type?: unknown; anyOf?: unknown[] };
  const own = Array.isArray(p.type) ? (p.type as string[]) : typeof p.type === 'string' ? [p.type] : [];
  return [...own, ...(Array.isArray(p.anyOf) ? p.anyOf.flatMap(schemaTypes) : [])];
}

/**
 * The numeric parameters of a query/path schema and the text each accepts. ajv's coercion takes anything
 * `Number()` takes (`1e2`, `0x10`, ` 5`, `5.0`), so the text is checked before it coerces.
 */
function numericParams(schema: TSchema): Array<{ name: string; pattern: RegExp; what: string }> {
  const props = (schema as { properties?: Record<string, unknown> }).properties ?? {};
  const out: Array<{ name: string; pattern: RegExp; what: string }> = [];
  for (const [name, prop] of Object.entries(props)) {
    const types = schemaTypes(prop);
    if (types.includes('integer')) out.push({ name, pattern: DECIMAL_INTEGER, what: 'a plain decimal integer' });
    else if (types.includes('number')) out.push({ name, pattern: DECIMAL_NUMBER, what: 'a plain decimal number' });
  }
  return out;
}

/**
 * Compiles a query-string or path-parameter validator (coercing text to numbers and booleans, applying defaults).
 * Before coercion: U+0000 in any value or name is refused (nothing with it could be stored or matched), and
 * numeric parameters must be plain decimal text (`limit=20`, not `1e2`, `0x10`, `%205` or `5.0`).
 *
 * @throws at call time: {@link AppError} 400 `INVALID_PARAMETERS` with `errors[]` naming the parameter.
 */
export function paramValidator<S extends TSchema>(schema: S): Validator<Static<S>> {
  const validate = build<Static<S>>(paramAjv.compile(schema), schema, '', paramFailure);
  const numeric = numericParams(schema);
  return (value) => {
    const problem = findJsonProblem(value);
    if (problem) throw paramFailure([problem]);
    if (value && typeof value === 'object') {
      const given = value as Record<string, unknown>;
      const errors: FieldError[] = numeric
        .filter(({ name, pattern }) => typeof given[name] === 'string' && !pattern.test(given[name]))
        .map(({ name, what }) => ({ field: name, message: `must be ${what}`, code: 'invalid_type' }));
      if (errors.length > 0) throw paramFailure(errors);
    }
    return validate(value);
  };
}

/**
 * Compiles a validator for data we produced ourselves (job payloads): returns errors instead of throwing.
 */
export function dataValidator<S extends TSchema>(
  schema: S,
): (value: unknown) => { ok: true; value: Static<S> } | { ok: false; errors: FieldError[] } {
  const fn = bodyAjv.compile(schema);
  return (value) =>
    fn(value)
      ? { ok: true, value: value as Static<S> }
      : { ok: false, errors: simplify(fn.errors ?? [], (p) => describeAt(schema, p)).map((e) => toFieldError(e, '')) };
}

function build<T>(
  fn: ValidateFunction,
  schema: TSchema,
  root: string,
  fail: (errors: FieldError[]) => AppError,
): Validator<T> {
  return (value) => {
    if (fn(value)) return value as T;
    const errors = simplify(fn.errors ?? [], (p) => describeAt(schema, p)).map((e) => toFieldError(e, root));
    const unique = new Map(errors.map((e) => [`${e.field}|${e.code}|${e.message}`, e]));
    throw fail([...unique.values()]);
  };
}
