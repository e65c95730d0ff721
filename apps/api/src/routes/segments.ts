/**
 * Segments: `GET/POST /segments`, `GET/PATCH/DELETE /segments/{id}`, `GET /segments/{id}/contacts`,
 * `POST /segments/preview`, and the members of STATIC segments (`POST /segments/{id}/members`,
 * `POST /segments/{id}/members/remove`, `DELETE /segments/{id}/members/{contactId}`).
 *
 * Plunk v2 compatibility (docs/api/overview.md): Plunk's `filters` (and its later name `condition`) are accepted as
 * aliases of `filter` and answered beside it; the lists take Plunk's `page`/`pageSize` and answer `segments` /
 * `contacts`, `page`, `pageSize`, `totalPages` beside ours.
 *
 * DYNAMIC segments hold a filter in the segment language (`@mailroom/audiences/segments`), compiled to one SQL
 * predicate (`@mailroom/audiences/audience`); STATIC segments hold explicit members. Counts are read from the segment row (maintained by trigger,
 * or recounted by the worker), never counted on read.
 *
 * @module
 */
import { Type, type Static } from '@sinclair/typebox';
import { notFound, validationError } from '@mailroom/platform/errors';
import { parseSegmentFilter } from '@mailroom/audiences/filter-parser';
import {
  changeStaticMembers,
  countMatchingContacts,
  createSegment,
  listMatchingContacts,
  listSegments,
  updateSegment,
  type SegmentRow,
} from '@mailroom/audiences/queries/segments';
import {
  checkNewFilter,
  deleteSegmentNow,
  newSegmentType,
  requireSameType,
  requireSegment,
  requireStatic,
} from '@mailroom/audiences/segment-rules';
import { compileAudience, segmentAudience } from '@mailroom/audiences/audience';
import { route } from '../http/route';
import { readDb, type AppDeps } from '../http/context';
import { Contact, presentContact } from './contacts';
import {
  cursorId,
  Deleted,
  IdParams,
  keysetPage,
  Nullable,
  PageFields,
  PageQuery,
  PlunkPageFields,
  PlunkPageQuery,
  plunkPageFields,
  resolvePaging,
  StringEnum,
  Timestamp,
} from './common';
import { FilterAliases, FilterField, requestFilter } from './filter-fields';

const SegmentType = StringEnum(['DYNAMIC', 'STATIC'] as const, 'DYNAMIC (filter) or STATIC (explicit members)');

const Segment = Type.Object({
  id: Type.String(),
  name: Type.String(),
  description: Nullable(Type.String()),
  type: SegmentType,
  filter: Nullable(Type.Unknown()),
  filters: Nullable(Type.Unknown({ description: "same as `filter` (Plunk v2's name)" })),
  condition: Nullable(Type.Unknown({ description: "same as `filter` (Plunk v2's later name)" })),
  trackMembership: Type.Boolean({ description: 'records segment.<name>.entry / .exit events when membership changes' }),
  memberCount: Nullable(
    Type.Integer({ description: 'members; null until a new or changed DYNAMIC segment is first counted' }),
  ),
  memberCountAt: Nullable(Timestamp),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

function presentSegment(s: SegmentRow): Static<typeof Segment> {
  const counted = s.memberCountAt !== null;
  const filter = s.filter ?? null;
  return {
    id: s.id,
    name: s.name,
    description: s.description,
    type: s.type,
    filter,
    filters: filter,
    condition: filter,
    trackMembership: s.trackMembership,
    memberCount: counted ? (s.memberCount ?? 0) : null,
    memberCountAt: s.memberCountAt?.toISOString() ?? null,
    createdAt: s.createdAt.toISOString(),
    updatedAt: s.updatedAt.toISOString(),
  };
}

const Name = Type.String({
  minLength: 1,
  maxLength: 200,
  pattern: '^\\S(.*\\S)?$',
  description: 'unique in the project; used in segment.<name>.entry/exit events',
});

const CreateSegment = Type.Object(
  {
    name: Name,
    description: Type.Optional(Nullable(Type.String({ maxLength: 2000 }))),
    type: Type.Optional(SegmentType),
    filter: Type.Optional(FilterField),
    ...FilterAliases,
    trackMembership: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);

const UpdateSegment = Type.Object(
  {
    name: Type.Optional(Name),
    description: Type.Optional(Nullable(Type.String({ maxLength: 2000 }))),
    type: Type.Optional(
      Type.Unsafe<'DYNAMIC' | 'STATIC'>({
        ...SegmentType,
        description: "the current type, as Plunk clients send it back; a segment's type cannot change (422)",
      }),
    ),
    filter: Type.Optional(FilterField),
    ...FilterAliases,
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
  changed: Type.Integer({
    description: 'contacts added (or removed); already members (or not members) are not counted',
  }),
  notFound: Type.Array(Type.String(), { description: 'ids or addresses that are not contacts of this project' }),
});

const Preview = Type.Object({
  count: Type.Integer(),
  sample: Type.Array(Contact, { description: 'newest matching contacts' }),
});

const ListQuery = Type.Object({ ...PageQuery, ...PlunkPageQuery }, { additionalProperties: false });

const SegmentPage = Type.Object({
  items: Type.Array(Segment),
  ...PageFields,
  segments: Type.Array(Segment, { description: "same as items (Plunk's form)" }),
  ...PlunkPageFields,
});

const ContactPage = Type.Object({
  items: Type.Array(Contact),
  ...PageFields,
  contacts: Type.Array(Contact, { description: "same as items (Plunk's form)" }),
  ...PlunkPageFields,
});

/** Routes of this module. */
export function segmentRoutes(deps: AppDeps) {
  const { db } = deps.database;
  /** Lists, searches and stats: a replica when one is usable (see `@mailroom/db/replicas`). */
  const reads = readDb(deps);
  const load = (projectId: string, id: string) => requireSegment(db, projectId, id);
  return [
    route({
      method: 'get',
      path: '/segments',
      operationId: 'listSegments',
      tag: 'Segments',
      summary: 'List segments, newest first',
      description:
        "Keyset pages by `cursor`; Plunk's `page`/`pageSize` are read by offset within the first 10,000 rows.",
      auth: 'secret',
      query: ListQuery,
      response: SegmentPage,
      status: 200,
      errors: [400, 401, 403, 429],
      handler: async ({ query, auth }) => {
        const paging = resolvePaging(query);
        const page = await listSegments(reads, auth.projectId, {
          limit: paging.limit,
          offset: paging.offset,
          beforeId: cursorId(query.cursor),
        });
        const body = keysetPage(page, presentSegment, page.total);
        return { data: { ...body, segments: body.items, ...plunkPageFields(page.total, paging.page, paging.limit) } };
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
        const { filters: _f, condition: _c, ...fields } = body;
        const filter = requestFilter(body);
        const type = newSegmentType(body.type, filter);
        const s = await createSegment(db, auth.projectId, { ...fields, filter: filter.value, type });
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
      body: Type.Object(
        {
          filter: Type.Optional(FilterField),
          ...FilterAliases,
          sampleSize: Type.Optional(Type.Integer({ minimum: 0, maximum: 50, default: 10 })),
        },
        { additionalProperties: false },
      ),
      response: Preview,
      status: 200,
      errors: [400, 401, 403, 422, 429],
      handler: async ({ body, auth }) => {
        const given = requestFilter(body);
        if (given.value === undefined)
          throw validationError([{ field: 'filter', message: 'is required', code: 'invalid_type' }]);
        const audience = { type: 'FILTERED' as const, filter: parseSegmentFilter(given.value, given.field) };
        const predicate = compileAudience(auth.projectId, audience, { now: Date.now() });
        const [counted, sample] = await Promise.all([
          countMatchingContacts(reads, auth.projectId, predicate),
          listMatchingContacts(reads, auth.projectId, predicate, { limit: body.sampleSize ?? 10 }),
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
      description:
        'A new filter is counted again by the worker (`memberCount` is null until then). `filters` / `condition` ' +
        '(Plunk v2) stand for `filter`; `type` may be sent back unchanged.',
      auth: 'secret',
      params: IdParams,
      body: UpdateSegment,
      response: Segment,
      status: 200,
      errors: [400, 401, 403, 404, 409, 422, 429],
      handler: async ({ params, body, auth }) => {
        const current = await load(auth.projectId, params.id);
        const { filters: _f, condition: _c, type, ...fields } = body;
        requireSameType(current, type);
        const filter = requestFilter(body);
        checkNewFilter(current, filter);
        const s = await updateSegment(db, auth.projectId, params.id, { ...fields, filter: filter.value });
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
        const failedCampaigns = await deleteSegmentNow(deps, log, auth.projectId, params.id);
        return { data: { id: params.id, deleted: true as const, failedCampaigns } };
      },
    }),
    route({
      method: 'get',
      path: '/segments/:id/contacts',
      operationId: 'listSegmentContacts',
      tag: 'Segments',
      summary: 'List the members of a segment, newest first',
      description:
        "DYNAMIC segments are evaluated live; `total` is the segment's maintained `memberCount`. Keyset pages by " +
        "`cursor`; Plunk's `page`/`pageSize` are read by offset within the first 10,000 members.",
      auth: 'secret',
      params: IdParams,
      query: ListQuery,
      response: ContactPage,
      status: 200,
      errors: [400, 401, 403, 404, 429],
      handler: async ({ params, query, auth }) => {
        const paging = resolvePaging(query);
        const s = await load(auth.projectId, params.id);
        const page = await listMatchingContacts(
          reads,
          auth.projectId,
          compileAudience(auth.projectId, segmentAudience(s), { now: Date.now() }),
          {
            limit: paging.limit,
            offset: paging.offset,
            beforeId: cursorId(query.cursor),
          },
        );
        const total = s.memberCount ?? 0;
        const body = keysetPage(page, presentContact, total);
        return { data: { ...body, contacts: body.items, ...plunkPageFields(total, paging.page, paging.limit) } };
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
          requireStatic(s);
          return { data: await changeStaticMembers(db, s, action, body, { test: auth.mode === 'test' }) };
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
        requireStatic(s);
        const r = await changeStaticMembers(
          db,
          s,
          'remove',
          { contactIds: [params.contactId] },
          { test: auth.mode === 'test' },
        );
        if (r.changed === 0) throw notFound('Segment member');
        return { data: { id: params.contactId, deleted: true as const } };
      },
    }),
  ];
}
