/**
 * The rules of a campaign's A/B test settings (docs/guides/campaigns.md, A/B tests): 2–5 variants, each a subject
 * and/or body or a template of the project (its subject and body copied in), a test share, a metric and a wait.
 * The request's shape (counts, ranges, enums) is checked by the route's schema; this module checks what needs the
 * database or several fields, and builds the stored {@link AbTestSettings}.
 *
 * @module
 */
import type { FieldError } from '@mailroom/platform/errors';
import { templateSyntaxErrors } from '@mailroom/mail/templates';
import { contentLimitErrors } from '@mailroom/mail/content-limits';
import type { AbMetric, AbTestSettings } from '@mailroom/db/schema/campaigns';
import { getTemplate } from '@mailroom/mail/queries/templates';
import type { DbOrTx } from '@mailroom/db/client';

/** Variants an A/B test has: at least two, at most five. */
export const AB_VARIANTS = { min: 2, max: 5 } as const;

/** The longest wait before the automatic choice (s): 30 days. */
export const AB_MAX_WAIT_SECONDS = 30 * 86_400;

/** A variant as a request gives it. */
export interface AbVariantInput {
  subject?: string | null;
  body?: string | null;
  templateId?: string | null;
}

/** The test's settings as a request gives them (`abTest`). */
export interface AbTestInput {
  testShare: number;
  metric: AbMetric;
  event?: string | null;
  waitSeconds: number;
}

/** Variant names, by index: A, B, C, D, E. */
export const variantName = (i: number) => String.fromCharCode(65 + i);

/**
 * The A/B settings of a create or update: `variants` and `abTest` go together (both or neither; `null` removes
 * the test on an update, `undefined` keeps what is stored).
 *
 * @param stored - the campaign's current settings (an update), or null.
 * @param minWaitSeconds - `CAMPAIGN_AB_MIN_WAIT_SECONDS`.
 * @returns the settings to store (`null` for none, `undefined` for unchanged), or the errors, each naming its field
 *   (`variants.2.subject`, `abTest.waitSeconds`…).
 */
export async function abTestSettings(
  db: DbOrTx,
  projectId: string,
  given: { variants?: AbVariantInput[] | null; abTest?: AbTestInput | null },
  stored: AbTestSettings | null,
  minWaitSeconds: number,
): Promise<{ settings: AbTestSettings | null | undefined; errors: FieldError[] }> {
  const errors: FieldError[] = [];
  if (given.variants === undefined && given.abTest === undefined) return { settings: undefined, errors };
  if (given.variants === null || given.abTest === null) {
    // Removing the test: both null, or one null and the other left out.
    if (given.variants != null)
      errors.push({
        field: 'abTest',
        message: 'is null: give both variants and abTest, or remove both',
        code: 'custom',
      });
    if (given.abTest != null)
      errors.push({
        field: 'variants',
        message: 'is null: give both variants and abTest, or remove both',
        code: 'custom',
      });
    return { settings: errors.length ? undefined : null, errors };
  }
  const abTest =
    given.abTest ??
    (stored
      ? { testShare: stored.testShare, metric: stored.metric, event: stored.event, waitSeconds: stored.waitSeconds }
      : undefined);
  if (!abTest)
    errors.push({
      field: 'abTest',
      message: 'is required with variants: the test share, metric and wait',
      code: 'invalid_type',
    });
  if (given.variants === undefined && !stored)
    errors.push({
      field: 'variants',
      message: `is required with abTest: ${AB_VARIANTS.min} to ${AB_VARIANTS.max} variants`,
      code: 'invalid_type',
    });
  if (abTest) {
    if (abTest.waitSeconds < minWaitSeconds) {
      errors.push({
        field: 'abTest.waitSeconds',
        message: `must be at least ${minWaitSeconds} seconds (CAMPAIGN_AB_MIN_WAIT_SECONDS)`,
        code: 'too_small',
      });
    }
    if (abTest.metric === 'event' && !abTest.event)
      errors.push({
        field: 'abTest.event',
        message: 'is required when metric is event: the name of the event (as given to /v1/track)',
        code: 'invalid_type',
      });
    if (abTest.metric !== 'event' && abTest.event)
      errors.push({ field: 'abTest.event', message: 'is only used when metric is event', code: 'custom' });
  }
  let variants = stored?.variants ?? [];
  if (given.variants !== undefined) {
    variants = [];
    for (const [i, v] of given.variants.entries()) {
      const field = (k: string) => `variants.${i}.${k}`;
      if (v.templateId) {
        if (v.subject != null || v.body != null) {
          errors.push({
            field: field('templateId'),
            message: 'give a templateId, or a subject and/or body, not both',
            code: 'custom',
          });
          continue;
        }
        const t = await getTemplate(db, projectId, v.templateId);
        if (!t) {
          errors.push({ field: field('templateId'), message: 'is not a template of this project', code: 'custom' });
          continue;
        }
        variants.push({ subject: t.subject, body: t.body, templateId: t.id });
      } else if (v.subject == null && v.body == null) {
        errors.push({ field: `variants.${i}`, message: 'needs a subject, a body, or a templateId', code: 'custom' });
        continue;
      } else {
        variants.push({ subject: v.subject ?? null, body: v.body ?? null, templateId: null });
      }
      const content = {
        subject: variants[variants.length - 1].subject ?? undefined,
        body: variants[variants.length - 1].body ?? undefined,
      };
      errors.push(...templateSyntaxErrors(content, field));
      errors.push(...contentLimitErrors(content, 'html', { subject: field('subject'), body: field('body') }));
    }
  }
  if (errors.length > 0 || !abTest) return { settings: undefined, errors };
  return {
    settings: {
      variants,
      testShare: abTest.testShare,
      metric: abTest.metric,
      event: abTest.metric === 'event' ? (abTest.event ?? null) : null,
      waitSeconds: abTest.waitSeconds,
    },
    errors,
  };
}
