/**
 * Segments: `GET/POST /segments`, `GET/PATCH/DELETE /segments/{id}`, `GET /segments/{id}/contacts`,
 * `POST /segments/preview`, and the members of STATIC segments (`POST /segments/{id}/members`,
 * `POST /segments/{id}/members/remove`, `DELETE /segments/{id}/members/{contactId}`).
 *
 * DYNAMIC segments hold a filter in the segment language (`@mailroom/core` segments), compiled to one SQL
 * predicate; STATIC segments hold explicit members. Counts are read from the segment row (maintained by trigger,
 * or recounted by the worker), never counted on read.
 *
 * @module
 */
import { Type, type Static } from '@sinclair/typebox';
import { AppError, ErrorCode, notFound, parseSegmentFilter, validationError } from '@mailroom/core';
import {
  changeStaticMembers,
  compileFilter,
  countMatchingContacts,
  createSegment,
  deleteSegment,
  getSegment,
  listMatchingContacts,
  listSegments,
  segmentPredicate,
  updateSegment,
  type SegmentRow,
} from '@mailroom/db';
import { route } from '../http/route';
import { announcedChange } from '../services/webhooks';
import type { AppDeps } from '../http/context';
import { Contact, presentContact } from './contacts';
import { cursorId, Deleted, IdParams, keysetPage, Nullable, PageFields, PageQuery, StringEnum, Timestamp } from './common';

/** The segment filter language as a request field (checked further by `parseSegmentFilter`). */
export const FilterField = Type.Unsafe<unknown>({
  oneOf: [{ type: 'object' }, { type: 'array' }],
  description:
    'Segment filter: `{logic: "AND"|"OR", groups: [{filters: [condition], conditions?: <filter>}]}` or an array of ' +
    'conditions (AND). A condition is `{field, operator, value?, unit?, window?, campaignId?}`; fields `email`, ' +
    '`subscribed`, `createdAt`, `updatedAt`, `data.<path>`, `event.<name>`, `email.sent|delivered|opened|clicked|' +
    'bounced|complained`; operators equals, notEquals, contains, notContains, startsWith, endsWith, greaterThan, ' +
    'lessThan, greaterThanOrEqual, lessThanOrEqual, in, notIn, exists, notExists, within, notWithin (units minutes, ' +
    'hours, days). `data.*` values compare by the filter value\'s type (number, boolean, string, ISO date). ' +
    '`notEquals`/`notContains`/`notIn`/`notExists` include contacts without the key. `event.<name>` with a count ' +
    'comparison counts occurrences, optionally in `window: {value, unit}`. Invalid filters get 422 naming the path.',
});

const SegmentType = StringEnum(['DYNAMIC', 'STATIC'] as const, 'DYNAMIC (filter) or STATIC (explicit members)');

const Segment = Type.Object({
  id: Type.String(),
  name: Type.String(),
  description: Nullable(Type.String()),
  type: SegmentType,
  filter: Nullable(Type.Unknown()),
  trackMembership: Type.Boolean({ description: 'records segment.<name>.entry / .exit events when membership changes' }),
  memberCount: Nullable(Type.Integer({ description: 'members; null until a new or changed DYNAMIC segment is first counted' })),
  memberCountAt: Nullable(Timestamp),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

function presentSegment(s: SegmentRow): Static<typeof Segment> {
  const counted = s.memberCountAt !== null;
  return {
    id: s.id,
    name: s.name,
    description: s.description,
    type: s.type,
    filter: s.filter ?? null,
    trackMembership: s.trackMembership,
    memberCount: counted ? (s.memberCount ?? 0) : null,
    memberCountAt: s.memberCountAt?.toISOString() ?? null,
    createdAt: s.createdAt.toISOString(),
    updatedAt: s.updatedAt.toISOString(),
  };
}

const Name = Type.String({ minLength: 1, maxLength: 200, pattern: '^\\S(.*\\S)?$', description: 'unique in the project; used in segment.<name>.entry/exit events' });

const CreateSegment = Type.Object(
  {
    name: Name,
    description: Type.Optional(Nullable(Type.String({ maxLength: 2000 }))),
    type: Type.Optional(SegmentType),
    filter: Type.Optional(FilterField),
    trackMembership: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);

const UpdateSegment = Type.Object(
  {
    name: Type.Optional(Name),
    description: Type.Optional(Nullable(Type.String({ maxLength: 2000 }))),
    filter: Type.Optional(FilterField),
    trackMembership: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false, minProperties: 1 },
);

const MemberRefs = Type.Object(
  {
    contactIds: Type.Optional(Type.Array(Type.String({ format: 'uuid' }), { maxItems: 1000 })),
    emails: Type.Optional(Type.Array(Type.String({ minLength: 3, maxLength: 320 }), { maxItems: 1000 })),
  },
  { additionalProperties: false, minProperties: 1 },
);

const MembershipResult = Type.Object({
  changed: Type.Integer({ description: 'contacts added (or removed); already members (or not members) are not counted' }),
  notFound: Type.Array(Type.String(), { description: 'ids or addresses that are not contacts of this project' }),
});

const Preview = Type.Object({
  count: Type.Integer(),
  sample: Type.Array(Contact, { description: 'newest matching contacts' }),
});

const ListQuery = Type.Object({ ...PageQuery }, { additionalProperties: false });

const ContactPage = Type.Object({ items: Type.Array(Contact), ...PageFields });

/** Routes of this module. */
export function segmentRoutes(deps: AppDeps) {
  const { db } = deps.database;
  const load = async (projectId: string, id: string) => {
    const s = await getSegment(db, projectId, id);
    if (!s) throw notFound('Segment');
    return s;
  };
  const staticOnly = (s: SegmentRow) => {
    if (s.type !== 'STATIC') {
      throw new AppError(ErrorCode.CONFLICT, 'Only STATIC segments have explicit members; a DYNAMIC segment is defined by its filter');
    }
  };
  return [
    route({
      method: 'get',
      path: '/segments',
      operationId: 'listSegments',
      tag: 'Segments',
      summary: 'List segments, newest first',
      auth: 'secret',
      query: ListQuery,
      response: Type.Object({ items: Type.Array(Segment), ...PageFields }),
      status: 200,
      errors: [400, 401, 403, 429],
      handler: async ({ query, auth }) => {
        const page = await listSegments(db, auth.projectId, { limit: query.limit, beforeId: cursorId(query.cursor) });
        return { data: keysetPage(page, presentSegment, page.total) };
      },
    }),
    route({
      method: 'post',
      path: '/segments',
      operationId: 'createSegment',
      tag: 'Segments',
      summary: 'Create a segment',
      description:
        'A DYNAMIC segment (the default when `filter` is given) matches its filter live; a STATIC one (the default ' +
        'without `filter`) holds the members added to it. `trackMembership` records `segment.<name>.entry` and ' +
        '`.exit` events: for STATIC segments when members are added or removed, for DYNAMIC ones when the worker ' +
        're-evaluates the segment (every SEGMENT_REFRESH_MS).',
      auth: 'secret',
      body: CreateSegment,
      response: Segment,
      status: 201,
      errors: [400, 401, 403, 409, 422, 429],
      handler: async ({ body, auth }) => {
        const type = body.type ?? (body.filter !== undefined ? 'DYNAMIC' : 'STATIC');
        if (type === 'DYNAMIC' && body.filter === undefined) throw validationError([{ field: 'filter', message: 'is required for a DYNAMIC segment', code: 'invalid_type' }]);
        if (type === 'STATIC' && body.filter !== undefined) throw validationError([{ field: 'filter', message: 'a STATIC segment has no filter', code: 'custom' }]);
        if (body.filter !== undefined) parseSegmentFilter(body.filter, 'filter');
        const s = await createSegment(db, auth.projectId, { ...body, type });
        return { data: presentSegment(s) };
      },
    }),
    route({
      method: 'post',
      path: '/segments/preview',
      operationId: 'previewSegment',
      tag: 'Segments',
      summary: 'Count and sample the contacts a filter matches, without saving',
      auth: 'secret',
      body: Type.Object({ filter: FilterField, sampleSize: Type.Optional(Type.Integer({ minimum: 0, maximum: 50, default: 10 })) }, { additionalProperties: false }),
      response: Preview,
      status: 200,
      errors: [400, 401, 403, 422, 429],
      handler: async ({ body, auth }) => {
        const filter = parseSegmentFilter(body.filter, 'filter');
        const predicate = compileFilter(filter, { projectId: auth.projectId, now: Date.now() });
        const [counted, sample] = await Promise.all([
          countMatchingContacts(db, auth.projectId, filter),
          listMatchingContacts(db, auth.projectId, predicate, { limit: body.sampleSize ?? 10 }),
        ]);
        return { data: { count: counted.count, sample: sample.items.map(presentContact) } };
      },
    }),
    route({
      method: 'get',
      path: '/segments/:id',
      operationId: 'getSegment',
      tag: 'Segments',
      summary: 'Get a segment',
      auth: 'secret',
      params: IdParams,
      response: Segment,
      status: 200,
      errors: [400, 401, 403, 404, 429],
      handler: async ({ params, auth }) => ({ data: presentSegment(await load(auth.projectId, params.id)) }),
    }),
    route({
      method: 'patch',
      path: '/segments/:id',
      operationId: 'updateSegment',
      tag: 'Segments',
      summary: 'Update a segment',
      description: 'A new filter is counted again by the worker (`memberCount` is null until then).',
      auth: 'secret',
      params: IdParams,
      body: UpdateSegment,
      response: Segment,
      status: 200,
      errors: [400, 401, 403, 404, 409, 422, 429],
      handler: async ({ params, body, auth }) => {
        const current = await load(auth.projectId, params.id);
        if (body.filter !== undefined) {
          if (current.type === 'STATIC') throw validationError([{ field: 'filter', message: 'a STATIC segment has no filter', code: 'custom' }]);
          parseSegmentFilter(body.filter, 'filter');
        }
        const s = await updateSegment(db, auth.projectId, params.id, body);
        if (!s) throw notFound('Segment');
        return { data: presentSegment(s) };
      },
    }),
    route({
      method: 'delete',
      path: '/segments/:id',
      operationId: 'deleteSegment',
      tag: 'Segments',
      summary: 'Delete a segment',
      description:
        'Campaigns SCHEDULED on this segment become FAILED (their audience is gone); a campaign still building its ' +
        'recipient list from it makes the delete a 409. DRAFT campaigns keep `segmentId: null`.',
      auth: 'secret',
      params: IdParams,
      response: Type.Intersect([Deleted, Type.Object({ failedCampaigns: Type.Array(Type.String()) })]),
      status: 200,
      errors: [400, 401, 403, 404, 409, 429],
      handler: async ({ params, auth, log }) => {
        const r = await announcedChange(
          deps,
          log,
          auth.projectId,
          (tx) => deleteSegment(tx, auth.projectId, params.id),
          (done) => (done.deleted ? done.failedCampaigns.map((campaignId) => ({ type: 'campaign.failed', data: { campaignId } })) : []),
        );
        if (!r.deleted && r.reason === 'missing') throw notFound('Segment');
        if (!r.deleted) throw new AppError(ErrorCode.CONFLICT, `Campaign ${r.campaignId} is still sending to this segment; cancel it or wait until its recipients are queued`);
        return { data: { id: params.id, deleted: true as const, failedCampaigns: r.failedCampaigns } };
      },
    }),
    route({
      method: 'get',
      path: '/segments/:id/contacts',
      operationId: 'listSegmentContacts',
      tag: 'Segments',
      summary: 'List the members of a segment, newest first',
      description: 'DYNAMIC segments are evaluated live; `total` is the segment\'s maintained `memberCount`.',
      auth: 'secret',
      params: IdParams,
      query: ListQuery,
      response: ContactPage,
      status: 200,
      errors: [400, 401, 403, 404, 429],
      handler: async ({ params, query, auth }) => {
        const s = await load(auth.projectId, params.id);
        const page = await listMatchingContacts(db, auth.projectId, segmentPredicate(s, Date.now()), { limit: query.limit, beforeId: cursorId(query.cursor) });
        return { data: keysetPage(page, presentContact, s.memberCount ?? 0) };
      },
    }),
    ...(['add', 'remove'] as const).map((action) =>
      route({
        method: 'post',
        path: action === 'add' ? '/segments/:id/members' : '/segments/:id/members/remove',
        operationId: action === 'add' ? 'addSegmentMembers' : 'removeSegmentMembers',
        tag: 'Segments',
        summary: action === 'add' ? 'Add contacts to a STATIC segment' : 'Remove contacts from a STATIC segment',
        description:
          'By contact id or address (at most 1,000 of each); unknown ones are listed in `notFound`. Adding a member ' +
          'twice, or removing a non-member, changes nothing.',
        auth: 'secret',
        params: IdParams,
        body: MemberRefs,
        response: MembershipResult,
        status: 200,
        errors: [400, 401, 403, 404, 409, 422, 429],
        handler: async ({ params, body, auth }) => {
          const s = await load(auth.projectId, params.id);
          staticOnly(s);
          return { data: await changeStaticMembers(db, s, action, body) };
        },
      }),
    ),
    route({
      method: 'delete',
      path: '/segments/:id/members/:contactId',
      operationId: 'removeSegmentMember',
      tag: 'Segments',
      summary: 'Remove one contact from a STATIC segment',
      auth: 'secret',
      params: Type.Object({ id: Type.String({ format: 'uuid' }), contactId: Type.String({ format: 'uuid' }) }),
      response: Deleted,
      status: 200,
      errors: [400, 401, 403, 404, 409, 429],
      handler: async ({ params, auth }) => {
        const s = await load(auth.projectId, params.id);
        staticOnly(s);
        const r = await changeStaticMembers(db, s, 'remove', { contactIds: [params.contactId] });
        if (r.changed === 0) throw notFound('Segment member');
        return { data: { id: params.contactId, deleted: true as const } };
      },
    }),
  ];
}
