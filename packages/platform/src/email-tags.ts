/**
 * Email tags: `{ name, value }` pairs a sender attaches to an email (`POST /v1/send`, the batch, campaigns,
 * workflow `SEND_EMAIL` steps). They are stored on the email, echoed in every `email.*` webhook payload, passed to
 * SES as message tags (`EmailTags` of `SendEmail`) beside the platform's own, and counted in `GET /reputation`'s
 * `?tag=name:value` figures.
 *
 * The character rule is SES's for message tags: a name and a value are each 1 to 256 ASCII letters, digits,
 * underscores or dashes. An email carries at most {@link EMAIL_TAG_LIMITS.count} tags, with distinct names, none of
 * them one the platform sets itself ({@link RESERVED_TAG_NAMES}).
 *
 * @module
 */
import { Type, type Static } from '@sinclair/typebox';
import type { FieldError } from './errors';

/** How many tags an email carries at most, and the longest name or value (characters). */
export const EMAIL_TAG_LIMITS = { count: 10, length: 256 } as const;

/**
 * Message tag names the platform sets on every SES request (feedback finds its email and project by them), so no
 * user tag may take them. Compared case-sensitively, as SES compares tag names.
 */
export const RESERVED_TAG_NAMES: readonly string[] = ['email_id', 'project_id'];

/** A single character class with one quantifier: linear on any input. */
const TAG_PATTERN = '^[A-Za-z0-9_-]+$';

const tagText = (what: string) =>
  Type.String({
    minLength: 1,
    maxLength: EMAIL_TAG_LIMITS.length,
    pattern: TAG_PATTERN,
    description: `${what}: 1 to ${EMAIL_TAG_LIMITS.length} ASCII letters, digits, underscores or dashes`,
  });

/** One tag, as the API takes and answers it. */
export const EmailTagSchema = Type.Object(
  { name: tagText('tag name'), value: tagText('tag value') },
  { additionalProperties: false },
);

/** One tag: `{ name, value }`. */
export type EmailTag = Static<typeof EmailTagSchema>;

/** The `tags` field of a request body (route schemas share it). */
export const EmailTagsSchema = Type.Array(EmailTagSchema, {
  maxItems: EMAIL_TAG_LIMITS.count,
  description:
    `at most ${EMAIL_TAG_LIMITS.count} { name, value } tags, names distinct and not ${RESERVED_TAG_NAMES.join(' or ')} (set by the platform). ` +
    'Stored on the email, echoed in its email.* webhook payloads, passed to SES as message tags, and a filter of GET /reputation (?tag=name:value)',
});

/**
 * What the schema cannot say about a list of tags: a name given twice, or one of {@link RESERVED_TAG_NAMES}.
 *
 * @param field - the path of the list in the body (`tags`, `steps.2.config.tags`); errors name `<field>.<i>.name`.
 * @returns one error per offending tag (empty when the list is fine).
 */
export function emailTagErrors(tags: readonly EmailTag[] | undefined, field = 'tags'): FieldError[] {
  if (!tags) return [];
  const errors: FieldError[] = [];
  const seen = new Set<string>();
  tags.forEach((tag, i) => {
    if (RESERVED_TAG_NAMES.includes(tag.name)) {
      errors.push({
        field: `${field}.${i}.name`,
        message: `"${tag.name}" is set by the platform and cannot be used`,
        code: 'custom',
      });
    } else if (seen.has(tag.name)) {
      errors.push({
        field: `${field}.${i}.name`,
        message: `"${tag.name}" is given more than once (tag names are unique per email)`,
        code: 'custom',
      });
    }
    seen.add(tag.name);
  });
  return errors;
}

/** The stored form of a list of tags: `null` when there are none (an untagged email stores nothing). */
export function storedTags(tags: readonly EmailTag[] | undefined | null): EmailTag[] | null {
  return tags && tags.length > 0 ? tags.map((t) => ({ name: t.name, value: t.value })) : null;
}

/**
 * Parses `GET /reputation`'s `tag` parameter, `name:value`.
 *
 * @returns the tag, or `undefined` when the text is not one valid tag.
 */
export function parseTagFilter(text: string): EmailTag | undefined {
  const at = text.indexOf(':');
  if (at < 0) return undefined;
  const name = text.slice(0, at);
  const value = text.slice(at + 1);
  const ok = (s: string) => s.length >= 1 && s.length <= EMAIL_TAG_LIMITS.length && TAG_CHARS.test(s);
  return ok(name) && ok(value) ? { name, value } : undefined;
}

const TAG_CHARS = new RegExp(TAG_PATTERN);
