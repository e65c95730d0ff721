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
import { keyKind, KEY_PREFIX_LENGTH, hashKey, type KeyKind } from '@mailroom/projects/keys';
import { parseSegmentFilter } from '@mailroom/audiences/filter-parser';
import { templateSyntaxErrors } from '@mailroom/mail/templates';
import { contentLimitErrors } from '@mailroom/mail/content-limits';
import { plunkRowId } from './ids';
import { reasonOf } from './steps';
import { type Row, fail, str, asObject, EMAIL, parent, contactRef, type MapContext, type Mapped } from './map-context';

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
