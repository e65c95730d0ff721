/**
 * Plunk v2 rows → rows of our schema. Pure functions: a row maps, or it is refused with a reason (reported,
 * never fatal). Decisions:
 * - nothing imported sends mail by itself: workflows arrive disabled, SCHEDULED campaigns as DRAFT, SENDING ones
 *   as CANCELLED (their history kept), unfinished history emails (PENDING/SENDING) as `cancelled`;
 * - domains arrive unverified (`pending`), so the worker's domain check decides;
 * - HEADLESS templates become TRANSACTIONAL (no layout either way);
 * - filters (segment conditions, FILTERED audiences) are Plunk's language, which ours accepts: each is validated
 *   and a filter ours refuses refuses its row.
 *
 * @module
 */
import { asciiHostname, emailKey, normalizeEmail, addressLengthProblem } from '@mailroom/platform/address';
import { keyKind, KEY_PREFIX_LENGTH, hashKey, type KeyKind } from '@mailroom/platform/keys';
import { parseSegmentFilter } from '@mailroom/audiences/segments';
import { templateSyntaxErrors } from '@mailroom/mail/templates';
import { contentLimitErrors } from '@mailroom/mail/content-limits';
import { plunkRowId } from './ids';
import { mapStepConfig, reasonOf } from './steps';

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
type Row = Record<string, any>;

const fail = (reason: string): { ok: false; reason: string } => ({ ok: false, reason });
const str = (v: unknown): string | null => (typeof v === 'string' && v.trim() !== '' ? v : null);
/** Plunk's `Json?` columns may hold any JSON; ours hold objects. A non-object value is kept under `value`. */
const asObject = (v: unknown): Record<string, unknown> =>
  v === null || v === undefined
    ? {}
    : typeof v === 'object' && !Array.isArray(v)
      ? (v as Record<string, unknown>)
      : { value: v };
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

function parent(
  ctx: MapContext,
  kind: 'project' | 'template' | 'segment' | 'campaign' | 'workflow' | 'step',
  plunkId: unknown,
) {
  return typeof plunkId === 'string' ? ctx[kind].get(plunkId) : undefined;
}

function contactRef(ctx: MapContext, r: Row): string | undefined {
  if (!r.contactId || !r.contactCreatedAt || ctx.missingContacts.has(r.contactId)) return undefined;
  return plunkRowId('contact', r.contactId, r.contactCreatedAt);
}

/** A Plunk project. */
export function mapProject(
  r: Row,
): Mapped<{ id: string; name: string; disabled: boolean; createdAt: Date; updatedAt: Date }> {
  const name = str(r.name)?.slice(0, 200) ?? 'Imported from Plunk';
  return {
    ok: true,
    row: {
      id: plunkRowId('project', r.id, r.createdAt),
      name,
      disabled: r.disabled === true,
      createdAt: r.createdAt,
      updatedAt: r.createdAt,
    },
  };
}

/**
 * One of a Plunk project's keys (`public` or `secret` column), stored as its SHA-256 like ours. Plunk's keys are
 * `pk_`/`sk_` plus hex, which our key format accepts; a key of another shape could never authenticate here and
 * is refused (the operator issues a new one with `project rotate-keys`).
 */
export function mapKey(r: Row, projectId: string, kind: KeyKind) {
  const key = kind === 'secret' ? r.secret : r.public;
  if (typeof key !== 'string' || keyKind(key) !== kind) {
    return fail(
      `${kind} key is not a ${kind === 'secret' ? 'sk_' : 'pk_'} key of 32–128 characters [A-Za-z0-9_-]: issue a new one with project rotate-keys`,
    );
  }
  return {
    ok: true as const,
    row: {
      id: plunkRowId('key', `${r.id}:${kind}`, r.createdAt),
      projectId,
      kind,
      keyHash: hashKey(key),
      keyPrefix: key.slice(0, KEY_PREFIX_LENGTH),
      createdAt: r.createdAt,
    },
  };
}

/** A Plunk sending domain: kept unverified (`pending`) until the worker's check verifies it here. */
export function mapDomain(r: Row, ctx: MapContext) {
  const projectId = parent(ctx, 'project', r.projectId);
  if (!projectId) return fail(`its project ${r.projectId} was not imported`);
  const domain = typeof r.domain === 'string' ? asciiHostname(r.domain) : null;
  if (!domain) return fail(`"${r.domain}" is not a domain name`);
  const dkimTokens = Array.isArray(r.dkimTokens)
    ? r.dkimTokens.filter((t: unknown): t is string => typeof t === 'string')
    : [];
  return {
    ok: true as const,
    row: {
      id: plunkRowId('domain', r.id, r.createdAt),
      projectId,
      domain,
      status: 'pending' as const,
      dkimTokens,
      createdAt: r.createdAt,
    },
    ...(r.verified ? { note: `domain ${domain} was verified in Plunk: imported unverified until checked here` } : {}),
  };
}

/** A Plunk contact with its data and subscription. */
export function mapContact(r: Row, ctx: MapContext) {
  const projectId = parent(ctx, 'project', r.projectId);
  if (!projectId) return fail(`its project ${r.projectId} was not imported`);
  const email = typeof r.email === 'string' ? normalizeEmail(r.email) : '';
  if (!EMAIL.test(email)) return fail(`"${r.email}" is not an email address`);
  const tooLong = addressLengthProblem(email);
  if (tooLong) return fail(`email ${tooLong}`);
  return {
    ok: true as const,
    row: {
      id: plunkRowId('contact', r.id, r.createdAt),
      projectId,
      email,
      emailKey: emailKey(email),
      subscribed: r.subscribed !== false,
      data: asObject(r.data),
      createdAt: r.createdAt,
      updatedAt: r.updatedAt ?? r.createdAt,
    },
  };
}

/** A Plunk template (HEADLESS becomes TRANSACTIONAL). */
export function mapTemplate(r: Row, ctx: MapContext) {
  const projectId = parent(ctx, 'project', r.projectId);
  if (!projectId) return fail(`its project ${r.projectId} was not imported`);
  const content = { subject: r.subject ?? '', body: r.body ?? '' };
  const syntax = [...templateSyntaxErrors(content), ...contentLimitErrors(content, 'html')];
  if (syntax.length > 0) return fail(`template syntax: ${syntax.map((e) => `${e.field} ${e.message}`).join('; ')}`);
  const type = r.type === 'MARKETING' ? ('MARKETING' as const) : ('TRANSACTIONAL' as const);
  return {
    ok: true as const,
    row: {
      id: plunkRowId('template', r.id, r.createdAt),
      projectId,
      name: str(r.name) ?? 'Untitled',
      description: str(r.description),
      subject: r.subject ?? '',
      body: r.body ?? '',
      type,
      from: str(r.from),
      fromName: str(r.fromName),
      replyTo: str(r.replyTo),
      createdAt: r.createdAt,
      updatedAt: r.updatedAt ?? r.createdAt,
    },
    ...(r.type === 'HEADLESS' ? { note: `template ${r.id} was HEADLESS: imported as TRANSACTIONAL` } : {}),
  };
}

/** A Plunk segment; a DYNAMIC one keeps its condition as our filter (validated). */
export function mapSegment(r: Row, ctx: MapContext) {
  const projectId = parent(ctx, 'project', r.projectId);
  if (!projectId) return fail(`its project ${r.projectId} was not imported`);
  const type = r.type === 'STATIC' ? ('STATIC' as const) : ('DYNAMIC' as const);
  if (type === 'DYNAMIC') {
    if (r.condition === null || r.condition === undefined) return fail('DYNAMIC segment without a condition');
    try {
      parseSegmentFilter(r.condition, 'condition');
    } catch (err) {
      return fail(reasonOf(err));
    }
  }
  const track = r.trackMembership === true;
  return {
    ok: true as const,
    row: {
      id: plunkRowId('segment', r.id, r.createdAt),
      projectId,
      name: str(r.name) ?? `Segment ${r.id}`,
      description: str(r.description),
      type,
      filter: type === 'DYNAMIC' ? r.condition : null,
      trackMembership: track,
      // Members of STATIC and tracked segments are imported next and counted by trigger from zero.
      memberCount: type === 'STATIC' || track ? 0 : null,
      memberCountAt: type === 'STATIC' ? r.createdAt : null,
      createdAt: r.createdAt,
      updatedAt: r.updatedAt ?? r.createdAt,
    },
  };
}

/** A current member of a STATIC (or tracked) Plunk segment. */
export function mapSegmentMember(r: Row, ctx: MapContext) {
  const segmentId = parent(ctx, 'segment', r.segmentId);
  if (!segmentId) return fail(`its segment ${r.segmentId} was not imported`);
  const contactId = contactRef(ctx, r);
  if (!contactId) return fail(`its contact ${r.contactId} was not imported`);
  return { ok: true as const, row: { segmentId, contactId, addedAt: r.enteredAt ?? new Date() } };
}

const CAMPAIGN_STATUS: Record<string, { status: 'DRAFT' | 'SENT' | 'CANCELLED'; note?: string }> = {
  DRAFT: { status: 'DRAFT' },
  SCHEDULED: {
    status: 'DRAFT',
    note: 'was SCHEDULED in Plunk: imported as DRAFT (schedule it here once Plunk no longer sends)',
  },
  SENDING: { status: 'CANCELLED', note: 'was SENDING in Plunk: imported as CANCELLED with its history' },
  SENT: { status: 'SENT' },
  CANCELLED: { status: 'CANCELLED' },
};

/** A Plunk campaign, draft or history (see {@link CAMPAIGN_STATUS} for states that would send). */
export function mapCampaign(r: Row, ctx: MapContext) {
  const projectId = parent(ctx, 'project', r.projectId);
  if (!projectId) return fail(`its project ${r.projectId} was not imported`);
  const state = CAMPAIGN_STATUS[r.status];
  if (!state) return fail(`unknown status ${r.status}`);
  const from = str(r.from);
  if (!from) return fail('campaign without a from address');
  const audienceType =
    r.audienceType === 'SEGMENT' || r.audienceType === 'FILTERED' ? r.audienceType : ('ALL' as const);
  let segmentId: string | null = null;
  if (audienceType === 'SEGMENT') {
    segmentId = parent(ctx, 'segment', r.segmentId) ?? null;
    if (!segmentId) return fail(`its audience segment ${r.segmentId ?? '(none)'} was not imported`);
  }
  if (audienceType === 'FILTERED') {
    try {
      parseSegmentFilter(r.audienceCondition, 'audienceCondition');
    } catch (err) {
      return fail(reasonOf(err));
    }
  }
  const ended = r.sentAt ?? r.updatedAt ?? r.createdAt;
  const finished = state.status !== 'DRAFT';
  return {
    ok: true as const,
    row: {
      id: plunkRowId('campaign', r.id, r.createdAt),
      projectId,
      name: str(r.name) ?? 'Untitled',
      description: str(r.description),
      subject: r.subject ?? '',
      body: r.body ?? '',
      fromEmail: from,
      fromName: str(r.fromName),
      replyTo: str(r.replyTo),
      audienceType,
      segmentId,
      audienceFilter: audienceType === 'FILTERED' ? r.audienceCondition : null,
      status: state.status,
      startedAt: state.status === 'SENT' ? ended : null,
      completedAt: state.status === 'SENT' ? ended : null,
      cancelledAt: state.status === 'CANCELLED' ? (r.updatedAt ?? ended) : null,
      recipients: Number(r.totalRecipients ?? 0),
      unsubscribed: Number(r.unsubscribedCount ?? 0),
      // A finished campaign's audience is done: nothing resumes its fan-out.
      fanoutDone: finished,
      createdAt: r.createdAt,
      updatedAt: r.updatedAt ?? r.createdAt,
    },
    ...(state.note ? { note: `campaign ${r.id} ${state.note}` } : {}),
  };
}

const EMAIL_STATUS: Record<string, string> = {
  PENDING: 'cancelled',
  SENDING: 'cancelled',
  SENT: 'sent',
  DELIVERED: 'delivered',
  RECEIVED: 'delivered',
  OPENED: 'opened',
  CLICKED: 'clicked',
  BOUNCED: 'bounced',
  COMPLAINED: 'complained',
  FAILED: 'failed',
};

/** One recipient of a Plunk campaign (its history); unfinished ones (PENDING/SENDING) become `cancelled`. */
export function mapCampaignEmail(r: Row, ctx: MapContext) {
  const campaignId = parent(ctx, 'campaign', r.campaignId);
  if (!campaignId) return fail(`its campaign ${r.campaignId} was not imported`);
  const projectId = parent(ctx, 'project', r.projectId);
  const contactId = contactRef(ctx, r);
  if (!contactId || !projectId) return fail(`its contact ${r.contactId} was not imported`);
  const status = EMAIL_STATUS[r.status];
  if (!status) return fail(`unknown status ${r.status}`);
  return {
    ok: true as const,
    row: {
      id: plunkRowId('email', r.id, r.createdAt),
      projectId,
      contactId,
      campaignId,
      marketing: true,
      source: 'campaign' as const,
      toEmail: normalizeEmail(String(r.toEmail)),
      toName: str(r.toName),
      fromEmail: str(r.from) ?? '',
      fromName: str(r.fromName),
      replyTo: str(r.replyTo),
      renderedSubject: str(r.subject),
      status: status as 'sent',
      messageId: str(r.messageId),
      error:
        str(r.error) ??
        (r.status === 'PENDING' || r.status === 'SENDING' ? 'imported from Plunk before it was sent' : null),
      sentAt: r.sentAt ?? null,
      deliveredAt: r.deliveredAt ?? null,
      openedAt: r.openedAt ?? null,
      clickedAt: r.clickedAt ?? null,
      openCount: Number(r.opens ?? 0),
      clickCount: Number(r.clicks ?? 0),
      createdAt: r.createdAt,
      updatedAt: r.updatedAt ?? r.createdAt,
    },
  };
}

/** A Plunk workflow, always imported disabled (enable it here once Plunk no longer runs it). */
export function mapWorkflow(r: Row, ctx: MapContext) {
  const projectId = parent(ctx, 'project', r.projectId);
  if (!projectId) return fail(`its project ${r.projectId} was not imported`);
  let triggerEvent: string | null = null;
  if (r.triggerType === 'EVENT') {
    triggerEvent = str(r.triggerConfig?.eventName);
    if (!triggerEvent) return fail('EVENT trigger without triggerConfig.eventName');
  } else if (r.triggerType !== 'MANUAL') {
    return fail(`${r.triggerType} triggers have no equivalent here (EVENT and MANUAL only)`);
  }
  return {
    ok: true as const,
    row: {
      id: plunkRowId('workflow', r.id, r.createdAt),
      projectId,
      name: str(r.name) ?? 'Untitled',
      description: str(r.description),
      triggerType: r.triggerType as 'EVENT' | 'MANUAL',
      triggerEvent,
      allowReentry: r.allowReentry === true,
      enabled: false,
      createdAt: r.createdAt,
      updatedAt: r.updatedAt ?? r.createdAt,
    },
    ...(r.enabled
      ? {
          note: `workflow ${r.id} was enabled in Plunk: imported disabled (enable it here once Plunk no longer runs it)`,
        }
      : {}),
  };
}

/** A Plunk workflow step (a TRIGGER step is no row here: `null`, and remembered in the context). */
export function mapStep(r: Row, ctx: MapContext, projectOf: (workflowId: string) => string | undefined) {
  const workflowId = parent(ctx, 'workflow', r.workflowId);
  const projectId = workflowId ? projectOf(workflowId) : undefined;
  if (!workflowId || !projectId) return fail(`its workflow ${r.workflowId} was not imported`);
  if (r.type === 'TRIGGER') {
    ctx.triggerSteps.add(r.id);
    return { ok: true as const, row: null };
  }
  const config = mapStepConfig(r.type, r.config, r.templateId, (id) => ctx.template.get(id));
  if (!config.ok) return config;
  return {
    ok: true as const,
    row: {
      id: plunkRowId('step', r.id, r.createdAt),
      workflowId,
      projectId,
      type: config.type,
      name: str(r.name) ?? r.type,
      config: config.config,
      createdAt: r.createdAt,
      updatedAt: r.updatedAt ?? r.createdAt,
    },
  };
}

/** A Plunk transition: from the TRIGGER step it is the entry edge; CONDITION and WAIT_FOR_EVENT name a branch. */
export function mapTransition(r: Row, ctx: MapContext, projectOf: (workflowId: string) => string | undefined) {
  const workflowId = parent(ctx, 'workflow', r.workflowId);
  const projectId = workflowId ? projectOf(workflowId) : undefined;
  if (!workflowId || !projectId) return fail(`its workflow ${r.workflowId} was not imported`);
  const entry = r.fromType === 'TRIGGER';
  const fromStepId = entry ? null : parent(ctx, 'step', r.fromStepId);
  if (!entry && !fromStepId) return fail(`its step ${r.fromStepId} was not imported`);
  const toStepId = parent(ctx, 'step', r.toStepId);
  if (!toStepId) return fail(`its target step ${r.toStepId} was not imported`);
  let branch = 'next';
  if (r.fromType === 'CONDITION') {
    const b = r.condition?.branch;
    branch = b === 'yes' || b === true || b === 'true' ? 'yes' : b === 'no' || b === false || b === 'false' ? 'no' : '';
    if (!branch) return fail('CONDITION transition without condition.branch yes/no');
  } else if (r.fromType === 'WAIT_FOR_EVENT') {
    branch = r.waitOutcome === 'TIMEOUT' ? 'timeout' : 'event';
  }
  return {
    ok: true as const,
    row: {
      id: plunkRowId('transition', r.id, r.createdAt),
      workflowId,
      projectId,
      fromStepId,
      toStepId,
      branch,
      createdAt: r.createdAt,
    },
  };
}

/** A Plunk event of a contact (an event without a contact has no place here). */
export function mapEvent(r: Row, ctx: MapContext) {
  const projectId = parent(ctx, 'project', r.projectId);
  if (!projectId) return fail(`its project ${r.projectId} was not imported`);
  if (!r.contactId) return fail('event without a contact (events here belong to a contact)');
  const contactId = contactRef(ctx, r);
  if (!contactId) return fail(`its contact ${r.contactId} was not imported`);
  const name = str(r.name);
  if (!name || name.length > 255) return fail('event name must be 1–255 characters');
  return {
    ok: true as const,
    row: {
      id: plunkRowId('event', r.id, r.createdAt),
      projectId,
      contactId,
      name,
      data: asObject(r.data),
      createdAt: r.createdAt,
    },
  };
}
