/**
 * The reputation gauges of the API's `/metrics`: each project's figures of `GET /reputation` (overall, per
 * window), read from Postgres with one grouped query over 7 days of `reputation_counts`.
 *
 * **Cached per process.** A read's figures are served for `REPUTATION_METRICS_TTL_MS` (default 60 s) after it
 * started, so scrapes (of every Prometheus, every API process) cost one query per process per TTL, not one each.
 * A read in flight is shared by every caller (the gauges of one scrape, and concurrent scrapes), and every gauge of
 * one scrape reads the same snapshot. A failed read is never cached: its scrape answers `up` 0 without the series,
 * and the next scrape reads again.
 *
 * - `mailroom_reputation_emails{project,window,outcome}`: outcome `sent`, `delivered`, `hard_bounce`,
 *   `soft_bounce`, `complaint`; window `24h` or `7d` (hourly buckets, see `GET /reputation`);
 * - `mailroom_reputation_hard_bounce_rate{project,window}` and `mailroom_reputation_complaint_rate{project,window}`:
 *   per email sent, as SES computes them (no series while a window has nothing sent);
 * - the same per sending domain, `mailroom_reputation_domain_emails{project,domain,window,outcome}` and
 *   `mailroom_reputation_domain_{hard_bounce,complaint}_rate{project,domain,window}`, and per campaign,
 *   `mailroom_reputation_campaign_emails{project,campaign,window,outcome}` and
 *   `mailroom_reputation_campaign_{hard_bounce,complaint}_rate{project,campaign,window}` (campaign = its id), as
 *   `GET /reputation` lists them;
 * - `mailroom_reputation_up`: 1 when the figures served were read (by this scrape or a cached read within the
 *   TTL: as it was at that read), 0 when this scrape's read failed or was slower than {@link READ_TIMEOUT_MS}. The
 *   scrape itself never fails for it: the per-project series are then left out rather than shown stale.
 *
 * **Bounded series.** Projects with activity in the last 7 days; per project, at most
 * {@link METRICS_DOMAINS_PER_PROJECT} sending domains (most sent in 7 days first; a sender may use any subdomain
 * of a verified domain) and at most {@link METRICS_CAMPAIGNS_PER_PROJECT} campaigns, only those with activity (a
 * send or an outcome) in the last 24 hours, most sent in them first; a campaign's series leave once it has been
 * quiet for a day. At most `projects × (1 + 20 + 20) × 2 windows × 7` series; `GET /reputation` has the rest.
 *
 * @module
 */
import { Gauge, type Registry } from 'prom-client';
import { sesRates } from '@mailroom/campaigns/guardrails';
import { type Logger } from '@mailroom/platform/logger';
import {
  reputationForMetrics,
  type ReputationCounts,
  type ReputationMetricsLimits,
  type ReputationWindow,
} from '@mailroom/feedback/queries/reputation';
import { type Db } from '@mailroom/db/client';

/** How long a scrape waits for the figures (ms). */
export const READ_TIMEOUT_MS = 3_000;

const WINDOW_LABEL: Record<ReputationWindow, string> = { last24h: '24h', last7d: '7d' };
const BREAKDOWNS = ['project', 'domain', 'campaign'] as const;
type Breakdown = (typeof BREAKDOWNS)[number];
const OUTCOMES: [keyof ReputationCounts, string][] = [
  ['sent', 'sent'],
  ['delivered', 'delivered'],
  ['hardBounces', 'hard_bounce'],
  ['softBounces', 'soft_bounce'],
  ['complaints', 'complaint'],
];

/** Sending domains per project in `/metrics` at most (see the module notes). */
export const METRICS_DOMAINS_PER_PROJECT = 20;
/** Campaigns per project in `/metrics` at most: those with activity in the last 24 hours (see the module notes). */
export const METRICS_CAMPAIGNS_PER_PROJECT = 20;

type Snapshot = Awaited<ReturnType<typeof reputationForMetrics>> | undefined;

/** Options of {@link registerReputationMetrics}. */
export interface ReputationMetricsOptions {
  /** `REPUTATION_METRICS_TTL_MS`: how long one read's figures are served (ms); 0 reads on every scrape. */
  ttlMs: number;
  /** The clock (ms since the epoch); tests replace it. */
  now?: () => number;
  /** Domains and campaigns per project; default {@link METRICS_DOMAINS_PER_PROJECT}, {@link METRICS_CAMPAIGNS_PER_PROJECT}. */
  limits?: ReputationMetricsLimits;
}

/**
 * Registers the reputation gauges on `registry`, read through a per-process cache (see the module notes). Read
 * errors are logged (warn) and reported by `mailroom_reputation_up`; they never fail the scrape.
 */
export function registerReputationMetrics(
  registry: Registry,
  db: Db,
  log: Logger,
  options: ReputationMetricsOptions,
): void {
  const now = options.now ?? Date.now;
  const limits = options.limits ?? {
    domainsPerProject: METRICS_DOMAINS_PER_PROJECT,
    campaignsPerProject: METRICS_CAMPAIGNS_PER_PROJECT,
  };
  let inFlight: Promise<Snapshot> | undefined;
  let cached: { at: number; figures: NonNullable<Snapshot> } | undefined;
  // The snapshot handed out in this turn of the event loop: the gauges of one scrape collect in one turn, so they
  // all get the same one even when the TTL runs out between two of them.
  let thisTurn: Promise<Snapshot> | undefined;
  const read = (): Promise<Snapshot> => {
    if (inFlight) return inFlight;
    const at = now();
    if (cached && at - cached.at < options.ttlMs) return Promise.resolve(cached.figures);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${READ_TIMEOUT_MS} ms`)), READ_TIMEOUT_MS);
    });
    inFlight = Promise.race([reputationForMetrics(db, limits), timeout])
      .then((figures) => {
        cached = { at, figures };
        return figures;
      })
      .catch((err: unknown) => {
        cached = undefined;
        log.warn({ err }, 'reputation metrics not read');
        return undefined;
      })
      .finally(() => {
        clearTimeout(timer);
        inFlight = undefined;
      });
    return inFlight;
  };
  const snapshot = (): Promise<Snapshot> => {
    if (!thisTurn) {
      thisTurn = read();
      setImmediate(() => (thisTurn = undefined));
    }
    return thisTurn;
  };
  type Labels = Record<string, string>;
  /** The series of one breakdown: per project, per project and domain, or per project and campaign. */
  const rowsOf = (
    s: NonNullable<Snapshot>,
    by: Breakdown,
  ): { labels: Labels; windows: Record<ReputationWindow, ReputationCounts> }[] =>
    by === 'project'
      ? s.projects.map((p) => ({ labels: { project: p.projectId }, windows: p.windows }))
      : by === 'domain'
        ? s.domains.map((d) => ({ labels: { project: d.projectId, domain: d.domain }, windows: d.windows }))
        : s.campaigns.map((c) => ({ labels: { project: c.projectId, campaign: c.campaignId }, windows: c.windows }));
  const each = (s: NonNullable<Snapshot>, by: Breakdown, fn: (labels: Labels, c: ReputationCounts) => void) => {
    for (const r of rowsOf(s, by))
      for (const w of Object.keys(WINDOW_LABEL) as ReputationWindow[])
        fn({ ...r.labels, window: WINDOW_LABEL[w] }, r.windows[w]);
  };

  for (const by of BREAKDOWNS) {
    const infix = by === 'project' ? '' : `${by}_`;
    const per =
      by === 'project'
        ? 'per project'
        : `per project and ${by === 'domain' ? 'sending domain' : 'campaign (id; those with activity in the last 24 hours)'}`;
    const keys = by === 'project' ? ['project'] : ['project', by];
    new Gauge({
      name: `mailroom_reputation_${infix}emails`,
      help: `emails ${per}, window (24h, 7d: hourly buckets ending now) and outcome (sent, delivered, hard_bounce, soft_bounce, complaint)`,
      labelNames: [...keys, 'window', 'outcome'],
      registers: [registry],
      async collect() {
        const s = await snapshot();
        this.reset();
        if (s)
          each(s, by, (labels, c) =>
            OUTCOMES.forEach(([field, outcome]) => this.set({ ...labels, outcome }, c[field])),
          );
      },
    });
    for (const [name, rate] of [
      [`mailroom_reputation_${infix}hard_bounce_rate`, 'hardBounceRate'],
      [`mailroom_reputation_${infix}complaint_rate`, 'complaintRate'],
    ] as const) {
      new Gauge({
        name,
        help: `${rate === 'hardBounceRate' ? 'hard bounces' : 'complaints'} per email sent, ${per} and window, as SES computes it (0–1)`,
        labelNames: [...keys, 'window'],
        registers: [registry],
        async collect() {
          const s = await snapshot();
          this.reset();
          if (!s) return;
          each(s, by, (labels, c) => {
            const v = sesRates(c)[rate];
            if (v !== null) this.set(labels, v);
          });
        },
      });
    }
  }
  new Gauge({
    name: 'mailroom_reputation_up',
    help: '1 when the reputation figures served were read from Postgres (by this scrape, or by a read cached for REPUTATION_METRICS_TTL_MS), 0 when this scrape could not read them',
    registers: [registry],
    async collect() {
      this.set((await snapshot()) ? 1 : 0);
    },
  });
}
