/**
 * Contacts and their events: the shapes shared by the API (`POST /contacts`, `/v1/track`) and the import worker,
 * and the rules for event names.
 *
 * @module
 */
import { Type, type Static } from '@sinclair/typebox';
import { normalizeEmail } from '@mailroom/platform/address';
import { addressString } from '@mailroom/platform/validation';
import type { FieldError } from '@mailroom/platform/errors';
import { upsertContacts, type UpsertedContact } from './queries/contacts';
import { type DbOrTx } from '@mailroom/db/client';

/**
 * An email address, as every route and import row accepts it: the `email` format checks the syntax and RFC 5321's
 * size limits (the whole address at most 254 octets, the local part 64, the domain 253, each label 63) on the
 * address's ASCII form. An internationalised domain (`user@bücher.de`) is accepted and stored and sent in punycode
 * (`user@xn--bcher-kva.de`); a non-ASCII local part is refused (Amazon SES has no SMTPUTF8). Surrounding whitespace
 * is accepted and cut off during validation (`addressString`).
 */
export const EmailAddress = addressString('email', {
  description:
    'an email address (RFC 5321: at most 254 characters, local part at most 64). An internationalised domain is accepted and ' +
    'stored in punycode (user@bücher.de → user@xn--bcher-kva.de); the part before the @ must be ASCII (SES has no SMTPUTF8). ' +
    'Surrounding whitespace is ignored',
});

/**
 * Contact metadata: free-form JSON object, shallow-merged into the stored data; a key set to `null` is removed, a
 * key set to the empty string `""` is ignored (it never overwrites a stored value).
 */
export const ContactData = Type.Record(Type.String({ maxLength: 200 }), Type.Unknown(), {
  description:
    'free-form metadata, shallow-merged into the stored data; a key set to null is removed; an empty-string value is ignored',
});

/** One contact to create or update: the body of `POST /contacts` and one record of an NDJSON/JSON import. */
export const ContactInput = Type.Object(
  {
    email: EmailAddress,
    subscribed: Type.Optional(
      Type.Boolean({ description: 'marketing subscription; default true for new contacts, unchanged when omitted' }),
    ),
    data: Type.Optional(ContactData),
  },
  { additionalProperties: false },
);
export type ContactInput = Static<typeof ContactInput>;

/**
 * Creates or updates one contact by address (case-insensitive). A new contact is subscribed unless `subscribed`
 * says otherwise; an existing one keeps its subscription when `subscribed` is omitted, and `data` is merged
 * shallowly (a `null` value removes the key).
 *
 * @param opts.test - a test key's request: the subscription events it records are test events.
 * @returns the stored contact; `inserted` tells whether it is new.
 */
export async function upsertContact(
  tx: DbOrTx,
  projectId: string,
  input: ContactInput,
  opts: { test: boolean },
): Promise<UpsertedContact> {
  const [c] = await upsertContacts(
    tx,
    projectId,
    [{ email: normalizeEmail(input.email), subscribed: input.subscribed, defaultSubscribed: true, data: input.data }],
    opts,
  );
  return c;
}

/** Longest accepted event name (characters). */
export const EVENT_NAME_MAX = 255;

/** Event-name prefixes the platform records itself (`email.sent`, `contact.subscribed`, `segment.entered`…). */
export const RESERVED_EVENT_PREFIXES = ['email.', 'contact.', 'segment.'] as const;

/**
 * Checks a custom event name from the public API after trimming it.
 *
 * @returns the trimmed name, or the field error (`event`): empty, longer than 255 characters, or a reserved
 *   system name (`email.*`, `contact.*`, `segment.*`, compared case-insensitively).
 */
export function checkEventName(raw: string): { ok: true; name: string } | { ok: false; error: FieldError } {
  const name = raw.trim();
  if (name.length === 0)
    return { ok: false, error: { field: 'event', message: 'must not be empty', code: 'too_small' } };
  if ([...name].length > EVENT_NAME_MAX) {
    return {
      ok: false,
      error: { field: 'event', message: `must be at most ${EVENT_NAME_MAX} characters`, code: 'too_big' },
    };
  }
  const lower = name.toLowerCase();
  const reserved = RESERVED_EVENT_PREFIXES.find((p) => lower.startsWith(p));
  if (reserved) {
    return {
      ok: false,
      error: {
        field: 'event',
        message: `names starting with "${reserved}" are reserved for system events`,
        code: 'custom',
      },
    };
  }
  return { ok: true, name };
}
