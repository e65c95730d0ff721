/**
 * `GET /reputation`: a project's sending reputation as SES sees it, over the last 24 hours and the last 7 days,
 * overall, per mail stream (`?stream=` narrows to one), per sending domain and per campaign, beside the guardrails its campaigns are judged by and SES's review
 * levels.
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import { effectiveGuardrails, SES_REVIEW_LEVELS, sesRates } from '@mailroom/campaigns/guardrails';
import { getProjectGuardrails } from '@mailroom/campaigns/queries/guardrails';
import {
  projectReputation,
  REPUTATION_STREAMS,
  type ReputationCounts,
  type ReputationWindowCounts,
} from '@mailroom/feedback/queries/reputation';
import {
  boundConnectionOf,
  connectionBindings,
  type ConnectionBindings,
} from '@mailroom/projects/queries/delivery-connections';
import { connectionNamed, type SesConnection } from '@mailroom/mail/connections';
import { route } from '../http/route';
import { AppError, ErrorCode } from '@mailroom/platform/errors';
import { parseTagFilter } from '@mailroom/platform/email-tags';
import { readDb, type AppDeps } from '../http/context';
import { Nullable, StringEnum, Timestamp } from './common';

/** Most campaigns listed per window. */
const CAMPAIGN_LIMIT = 100;

const FigureFields = {
  sent: Type.Integer({ description: 'emails SES accepted (test emails never count)' }),
  delivered: Type.Integer({ description: 'first deliveries SES reported' }),
  hardBounces: Type.Integer({ description: 'permanent bounces' }),
  softBounces: Type.Integer({ description: 'transient and undetermined bounces' }),
  complaints: Type.Integer(),
  hardBounceRate: Nullable(
    Type.Number({ description: 'hardBounces / sent, as SES computes its bounce rate; null when nothing was sent' }),
  ),
  complaintRate: Nullable(
    Type.Number({ description: 'complaints / sent, as SES computes its complaint rate; null when nothing was sent' }),
  ),
  softBounceRate: Nullable(Type.Number({ description: 'softBounces / sent; null when nothing was sent' })),
  deliveryRate: Nullable(Type.Number({ description: 'delivered / sent; null when nothing was sent' })),
};

const Window = Type.Object({
  since: Type.String({
    format: 'date-time',
    description: 'start of the first hourly bucket (counts are kept per UTC hour)',
  }),
  overall: Type.Object(FigureFields),
  streams: Type.Object(
    { transactional: Type.Object(FigureFields), marketing: Type.Object(FigureFields) },
    {
      description:
        'per mail stream: transactional (`/v1/send`, TRANSACTIONAL templates, transactional workflow mail) and marketing (campaigns, MARKETING ' +
        'templates, marketing workflow mail), each judged against `sesReviewLevels` on its own (different configuration sets, IP pools). With ' +
        '`?stream=` the other stream is all zeros',
    },
  ),
  domains: Type.Array(
    Type.Object({ domain: Type.String({ description: 'sending domain (the From address after @)' }), ...FigureFields }),
    {
      description: 'per sending domain with activity in the window, most sent first',
    },
  ),
  campaigns: Type.Array(
    Type.Object({
      campaignId: Type.String(),
      name: Nullable(Type.String({ description: 'null once the campaign is deleted' })),
      ...FigureFields,
    }),
    {
      description: `per campaign with activity in the window, most sent first, at most ${CAMPAIGN_LIMIT}`,
    },
  ),
  campaignsTruncated: Type.Boolean({ description: `more than ${CAMPAIGN_LIMIT} campaigns had activity in the window` }),
  connections: Type.Array(
    Type.Object({
      connection: Type.String({ description: 'the delivery connection (SES account and region)' }),
      ...FigureFields,
    }),
    {
      description:
        "per delivery connection the project's sending domains are bound to now (each SES account is reviewed on its own figures), most sent " +
        'first: the domain figures summed by their current binding (mail sent through another connection during a failover counts under the bound one)',
    },
  ),
});

const ReputationQuery = Type.Object(
  {
    stream: Type.Optional(StringEnum(REPUTATION_STREAMS, 'only mail of this stream: every figure of the answer')),
    tag: Type.Optional(
      Type.String({
        minLength: 3,
        maxLength: 513,
        description:
          'name:value: only the outcomes of emails carrying this tag (every figure: overall, per domain, per campaign, per connection)',
      }),
    ),
  },
  { additionalProperties: false },
);

const Reputation = Type.Object({
  generatedAt: Timestamp,
  stream: Nullable(StringEnum(REPUTATION_STREAMS, 'the stream asked for (`?stream=`); null: all mail')),
  last24h: Window,
  last7d: Window,
  guardrails: Type.Object(
    {
      minSample: Type.Integer({
        description: 'outcomes (deliveries plus hard and soft bounces) before a campaign is judged',
      }),
      maxHardBounceRate: Type.Number({ description: 'hard bounces per outcome above which a SENDING campaign pauses' }),
      maxComplaintRate: Type.Number({ description: 'complaints per outcome above which a SENDING campaign pauses' }),
    },
    {
      description:
        "the guardrails this project's campaigns are judged by (service defaults unless the operator set the project's own)",
    },
  ),
  sesReviewLevels: Type.Object(
    { hardBounceRate: Type.Number(), complaintRate: Type.Number() },
    { description: 'the rates at which SES puts the (shared) account under review: 0.05 and 0.001' },
  ),
});

/** A window's counts with their rates, all per email sent (null when nothing was sent). */
function figures<T extends ReputationCounts>(c: T) {
  const perSent = (n: number) => (c.sent > 0 ? n / c.sent : null);
  return { ...c, ...sesRates(c), softBounceRate: perSent(c.softBounces), deliveryRate: perSent(c.delivered) };
}

/** The window's domain figures summed by the connection each domain is bound to now. */
function byConnection(w: ReputationWindowCounts, bindings: ConnectionBindings, connections: readonly SesConnection[]) {
  const sums = new Map<string, ReputationCounts>();
  for (const d of w.domains) {
    const name = connectionNamed(connections, boundConnectionOf(bindings, d.domain)).name;
    const s = sums.get(name) ?? { sent: 0, delivered: 0, hardBounces: 0, softBounces: 0, complaints: 0 };
    sums.set(name, {
      sent: s.sent + d.sent,
      delivered: s.delivered + d.delivered,
      hardBounces: s.hardBounces + d.hardBounces,
      softBounces: s.softBounces + d.softBounces,
      complaints: s.complaints + d.complaints,
    });
  }
  return [...sums]
    .map(([connection, c]) => figures({ connection, ...c }))
    .sort((a, b) => b.sent - a.sent || a.connection.localeCompare(b.connection));
}

function presentWindow(w: ReputationWindowCounts, bindings: ConnectionBindings, connections: readonly SesConnection[]) {
  return {
    since: w.since.toISOString(),
    overall: figures(w.overall),
    streams: { transactional: figures(w.streams.transactional), marketing: figures(w.streams.marketing) },
    domains: w.domains.map(figures),
    campaigns: w.campaigns.map(figures),
    campaignsTruncated: w.campaignsTruncated,
    connections: byConnection(w, bindings, connections),
  };
}

/** The route of this module. */
export function reputationRoutes(deps: AppDeps) {
  /** Lists, searches and stats: a replica when one is usable (see `@mailroom/db/replicas`). */
  const reads = readDb(deps);
  return [
    route({
      method: 'get',
      path: '/reputation',
      operationId: 'getReputation',
      tag: 'Reputation',
      summary: 'Sends, deliveries, bounces, complaints and their rates over the last 24 hours and 7 days',
      description:
        'Overall, per mail stream (transactional, marketing), per sending domain, per campaign and per delivery connection (SES account); ' +
        '`?stream=transactional|marketing` narrows every figure to one stream. Counts are kept per UTC hour: `last24h` is the 24 hourly buckets ' +
        'ending with the current one (23 to 24 hours of history), `last7d` the 168 such buckets. An outcome counts in ' +
        'the hour SES reported it. Rates are per email sent, as SES computes them for its account review ' +
        '(`sesReviewLevels`); campaign guardrails judge per outcome instead (see `guardrails`). Test emails never count. ' +
        'With `?tag=name:value`, every figure counts only the emails carrying that tag (counted from when the tag was first sent).',
      auth: 'secret',
      query: ReputationQuery,
      response: Reputation,
      status: 200,
      errors: [400, 401, 403, 429],
      handler: async ({ auth, query }) => {
        const tag = query.tag === undefined ? undefined : parseTagFilter(query.tag);
        if (query.tag !== undefined && !tag) {
          throw new AppError(
            ErrorCode.INVALID_PARAMETERS,
            'tag: must be name:value, each 1 to 256 ASCII letters, digits, underscores or dashes',
            {
              errors: [
                {
                  field: 'tag',
                  message: 'must be name:value, each 1 to 256 ASCII letters, digits, underscores or dashes',
                  code: 'invalid_string',
                },
              ],
            },
          );
        }
        const [r, overrides, bindings] = [
          await projectReputation(reads, auth.projectId, CAMPAIGN_LIMIT, query.stream, tag),
          await getProjectGuardrails(reads, auth.projectId),
          await connectionBindings(reads, auth.projectId),
        ];
        const connections = deps.config.sesConnections;
        return {
          data: {
            generatedAt: new Date().toISOString(),
            stream: query.stream ?? null,
            last24h: presentWindow(r.windows.last24h, bindings, connections),
            last7d: presentWindow(r.windows.last7d, bindings, connections),
            guardrails: effectiveGuardrails(deps.config.guardrails, overrides),
            sesReviewLevels: { ...SES_REVIEW_LEVELS },
          },
        };
      },
    }),
  ];
}
