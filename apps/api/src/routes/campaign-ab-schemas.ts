/**
 * The shapes of a campaign's A/B test (docs/guides/campaigns.md, A/B tests): the `variants` and `abTest` of a
 * create or update, how a campaign shows them, and the per-variant figures of `GET /campaigns/{id}/variants`.
 *
 * @module
 */
import { Type, type Static } from '@sinclair/typebox';
import { AB_METRICS, AB_PHASES } from '@mailroom/db/schema/campaigns';
import type { CampaignRow } from '@mailroom/campaigns/queries/campaigns';
import { AB_MAX_WAIT_SECONDS, AB_VARIANTS, variantName } from '@mailroom/campaigns/ab-rules';
import type { VariantStats } from '@mailroom/campaigns/ab-decide';
import { Nullable, StringEnum, Timestamp } from './common';

const Metric = StringEnum(
  AB_METRICS,
  'opens, clicks, or event (a custom event recorded by /v1/track after the email was sent)',
);

/** One variant of a create or update. */
export const VariantInput = Type.Object(
  {
    subject: Type.Optional(
      Nullable(
        Type.String({ minLength: 1, maxLength: 998, description: "subject template; the campaign's when left out" }),
      ),
    ),
    body: Type.Optional(
      Nullable(
        Type.String({
          minLength: 1,
          maxLength: 2_000_000,
          description: "HTML body template; the campaign's when left out",
        }),
      ),
    ),
    templateId: Type.Optional(
      Nullable(
        Type.String({
          format: 'uuid',
          description:
            'a template of the project instead of subject and body: its subject and body are copied in when the campaign is stored',
        }),
      ),
    ),
  },
  { additionalProperties: false },
);

/** The `variants` of a create or update. */
export const VariantsInput = Type.Array(VariantInput, {
  minItems: AB_VARIANTS.min,
  maxItems: AB_VARIANTS.max,
  description: `${AB_VARIANTS.min}–${AB_VARIANTS.max} variants (A, B, …), each a subject and/or body or a templateId; null removes the A/B test`,
});

/** The `abTest` settings of a create or update. */
export const AbTestInput = Type.Object(
  {
    testShare: Type.Number({
      minimum: 1,
      maximum: 100,
      description: 'percent of the audience that gets the variants (split evenly, at random); the rest gets the winner',
    }),
    metric: Metric,
    event: Type.Optional(
      Nullable(
        Type.String({ minLength: 1, maxLength: 255, description: "the custom event's name when metric is event" }),
      ),
    ),
    waitSeconds: Type.Integer({
      minimum: 1,
      maximum: AB_MAX_WAIT_SECONDS,
      description:
        "seconds from the last test email's final state to the automatic choice of the winner (at least CAMPAIGN_AB_MIN_WAIT_SECONDS, default 300)",
    }),
  },
  { additionalProperties: false, description: 'null removes the A/B test' },
);

/** The A/B body fields of a create or update. */
export const AbFields = {
  variants: Type.Optional(Nullable(VariantsInput)),
  abTest: Type.Optional(Nullable(AbTestInput)),
};

const VariantFigures = Type.Object({
  variant: Type.Integer(),
  sent: Type.Integer(),
  conversions: Type.Integer({ description: "the metric's count" }),
  rate: Type.Number({ description: 'conversions per email sent (0–1)' }),
});

/** The decision, as stored. */
export const Decision = Type.Object({
  winner: Type.Integer(),
  by: StringEnum(['auto', 'manual'] as const, 'auto (after the wait) or manual (POST /campaigns/{id}/winner)'),
  basis: StringEnum(['metric', 'choice'] as const, 'metric: the highest rate; choice: a variant picked by hand'),
  decidedAt: Timestamp,
  metric: Metric,
  event: Nullable(Type.String()),
  variants: Type.Array(VariantFigures, { description: "the test group's figures the winner was chosen on" }),
  pValue: Nullable(
    Type.Number({ description: 'two-sided p-value of the two-proportion z-test between the two highest rates' }),
  ),
  z: Nullable(Type.Number()),
  withinNoise: Type.Boolean({
    description: 'p ≥ 0.05 (or no test possible): the higher rate was picked, but the difference may be noise',
  }),
  note: Nullable(Type.String()),
});

/** A variant as a campaign shows it. */
export const Variant = Type.Object({
  index: Type.Integer({ description: '0-based; emails and webhooks carry it as `variant`' }),
  name: Type.String({ description: 'A, B, C, D or E' }),
  subject: Nullable(Type.String()),
  body: Nullable(Type.String()),
  templateId: Nullable(Type.String()),
});

/** A campaign's A/B test as it shows it. */
export const AbTest = Type.Object({
  testShare: Type.Number(),
  metric: Metric,
  event: Nullable(Type.String()),
  waitSeconds: Type.Integer(),
  phase: Nullable(
    StringEnum(
      AB_PHASES,
      'TESTING (the variants go to the test group), WAITING (until decideAt), WINNER (the winner goes to the rest)',
    ),
  ),
  decideAt: Nullable(Timestamp),
  winner: Nullable(Type.Integer()),
  decision: Nullable(Decision),
});

/** The A/B fields of a campaign answer. */
export const CampaignAbFields = {
  variants: Nullable(Type.Array(Variant, { description: "the A/B test's variants; null without one" })),
  abTest: Nullable(AbTest),
};

/** A campaign's A/B fields. */
export function presentAb(c: CampaignRow): {
  variants: Static<typeof Variant>[] | null;
  abTest: Static<typeof AbTest> | null;
} {
  const t = c.abTest;
  if (!t) return { variants: null, abTest: null };
  return {
    variants: t.variants.map((v, i) => ({
      index: i,
      name: variantName(i),
      subject: v.subject,
      body: v.body,
      templateId: v.templateId,
    })),
    abTest: {
      testShare: t.testShare,
      metric: t.metric,
      event: t.event,
      waitSeconds: t.waitSeconds,
      phase: c.abPhase,
      decideAt: c.abDecideAt?.toISOString() ?? null,
      winner: c.abWinner,
      decision: c.abDecision,
    },
  };
}

/** `GET /campaigns/{id}/variants`. */
export const VariantsReport = Type.Object({
  campaignId: Type.String(),
  phase: Nullable(StringEnum(AB_PHASES)),
  metric: Metric,
  event: Nullable(Type.String()),
  testShare: Type.Number(),
  decideAt: Nullable(Timestamp),
  winner: Nullable(Type.Integer()),
  variants: Type.Array(
    Type.Object({
      variant: Type.Integer(),
      name: Type.String(),
      subject: Type.String({ description: 'the subject template it sends' }),
      templateId: Nullable(Type.String()),
      recipients: Type.Integer({
        description: "emails of the variant (the winner's include the rest of the audience once it is sent)",
      }),
      sent: Type.Integer(),
      delivered: Type.Integer(),
      opens: Type.Integer({ description: 'emails opened (or clicked)' }),
      clicks: Type.Integer({ description: 'emails clicked' }),
      metricCount: Type.Integer({ description: "the metric's conversions so far" }),
      metricRate: Type.Number({ description: 'metricCount per email sent (0–1)' }),
      winner: Type.Boolean(),
    }),
  ),
  decision: Nullable(Decision),
});

/** The report of `GET /campaigns/{id}/variants`. */
export function presentVariants(c: CampaignRow, stats: VariantStats[]): Static<typeof VariantsReport> {
  const t = c.abTest!;
  return {
    campaignId: c.id,
    phase: c.abPhase,
    metric: t.metric,
    event: t.event,
    testShare: t.testShare,
    decideAt: c.abDecideAt?.toISOString() ?? null,
    winner: c.abWinner,
    variants: stats.map((v) => ({
      variant: v.variant,
      name: v.name,
      subject: v.subject,
      templateId: v.templateId,
      recipients: v.recipients,
      sent: v.sent,
      delivered: v.delivered,
      opens: v.opened,
      clicks: v.clicked,
      metricCount: v.conversions,
      metricRate: v.rate,
      winner: v.winner,
    })),
    decision: c.abDecision,
  };
}
