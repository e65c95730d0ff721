/**
 * Template versions: `GET /templates/{id}/versions` (newest first, keyset on the number), `GET
 * /templates/{id}/versions/{version}`, `POST /templates/{id}/publish` (the draft goes live) and `DELETE
 * /templates/{id}/draft`. Drafts are written by `PATCH /templates/{id}?draft=true` (`templates.ts`); the rules are
 * in `@mailroom/mail/queries/template-versions`.
 *
 * @module
 */
import { Type, type Static } from '@sinclair/typebox';
import { AppError, ErrorCode, notFound } from '@mailroom/platform/errors';
import { getTemplate } from '@mailroom/mail/queries/templates';
import {
  discardDraft,
  getVersion,
  listVersions,
  publishDraft,
  type TemplateVersionRow,
} from '@mailroom/mail/queries/template-versions';
import { route } from '../http/route';
import type { AppDeps } from '../http/context';
import { IdParams, Nullable, PageFields, PageQuery, Timestamp } from './common';
import { present, Template } from './templates';

const TemplateVersion = Type.Object({
  templateId: Type.String(),
  version: Type.Integer({ minimum: 1 }),
  status: Type.Union([Type.Literal('published'), Type.Literal('draft')], {
    description: '`draft` for the one draft, else `published`',
  }),
  live: Type.Boolean({ description: 'this is the version /v1/send and unpinned steps use now' }),
  subject: Type.String(),
  body: Type.String(),
  from: Nullable(Type.String()),
  fromName: Nullable(Type.String()),
  replyTo: Nullable(Type.String()),
  publishedAt: Nullable(Timestamp),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

function presentVersion(v: TemplateVersionRow, liveVersion: number): Static<typeof TemplateVersion> {
  return {
    templateId: v.templateId,
    version: v.version,
    status: v.publishedAt ? 'published' : 'draft',
    live: v.version === liveVersion && v.publishedAt !== null,
    subject: v.subject,
    body: v.body,
    from: v.from,
    fromName: v.fromName,
    replyTo: v.replyTo,
    publishedAt: v.publishedAt?.toISOString() ?? null,
    createdAt: v.createdAt.toISOString(),
    updatedAt: v.updatedAt.toISOString(),
  };
}

/** A cursor of this list: the last version number of the page, in the API's opaque form. */
const encodeVersionCursor = (n: number) => Buffer.from(`tv1:${n}`, 'utf8').toString('base64url');

function decodeVersionCursor(cursor: string): number {
  const text = Buffer.from(cursor, 'base64url').toString('utf8');
  const n = text.startsWith('tv1:') ? Number(text.slice(4)) : NaN;
  if (!Number.isInteger(n) || n < 1) {
    throw new AppError(ErrorCode.INVALID_PARAMETERS, 'cursor: is not a cursor returned by this API', {
      errors: [{ field: 'cursor', message: 'is not a cursor returned by this API', code: 'invalid_string' }],
    });
  }
  return n;
}

const VersionParams = Type.Object({
  id: Type.String({ format: 'uuid', description: 'template id' }),
  version: Type.Integer({ minimum: 1, maximum: 2_147_483_647, description: 'version number' }),
});

const ListQuery = Type.Object({ ...PageQuery }, { additionalProperties: false });

const noDraft = () =>
  new AppError(ErrorCode.INVALID_STATE, 'The template has no draft (write one with PATCH /templates/{id}?draft=true)');

/** Routes of this module. */
export function templateVersionRoutes(deps: AppDeps) {
  const { db } = deps.database;
  const template = async (projectId: string, id: string) => {
    const t = await getTemplate(db, projectId, id);
    if (!t) throw notFound('Template');
    return t;
  };
  return [
    route({
      method: 'get',
      path: '/templates/:id/versions',
      operationId: 'listTemplateVersions',
      tag: 'Templates',
      summary: "List a template's versions, newest first (the draft, if any, is the newest)",
      description: 'Keyset pagination on the version number: pass `nextCursor` back as `cursor`.',
      auth: 'secret',
      params: IdParams,
      query: ListQuery,
      response: Type.Object({ items: Type.Array(TemplateVersion), ...PageFields }),
      status: 200,
      errors: [400, 401, 403, 404, 429],
      handler: async ({ params, query, auth }) => {
        const t = await template(auth.projectId, params.id);
        const page = await listVersions(db, t, {
          limit: query.limit,
          beforeVersion: query.cursor ? decodeVersionCursor(query.cursor) : undefined,
        });
        const last = page.items[page.items.length - 1];
        return {
          data: {
            items: page.items.map((v) => presentVersion(v, t.version)),
            nextCursor: page.hasMore && last ? encodeVersionCursor(last.version) : null,
            hasMore: page.hasMore,
            total: page.total,
          },
        };
      },
    }),
    route({
      method: 'get',
      path: '/templates/:id/versions/:version',
      operationId: 'getTemplateVersion',
      tag: 'Templates',
      summary: 'Get one version of a template',
      auth: 'secret',
      params: VersionParams,
      response: TemplateVersion,
      status: 200,
      errors: [400, 401, 403, 404, 429],
      handler: async ({ params, auth }) => {
        const t = await template(auth.projectId, params.id);
        const v = await getVersion(db, t, params.version);
        if (!v) throw notFound('Template version');
        return { data: presentVersion(v, t.version) };
      },
    }),
    route({
      method: 'post',
      path: '/templates/:id/publish',
      operationId: 'publishTemplate',
      tag: 'Templates',
      summary: 'Publish the draft: it becomes the live version',
      description:
        'The next /v1/send and every step or campaign following "latest published" use it; pinned ones keep their version. ' +
        '409 `INVALID_STATE` when there is no draft.',
      auth: 'secret',
      params: IdParams,
      response: Template,
      status: 200,
      errors: [400, 401, 403, 404, 409, 429],
      handler: async ({ params, auth }) => {
        const row = await publishDraft(db, auth.projectId, params.id);
        if (!row) throw notFound('Template');
        if ('conflict' in row) throw noDraft();
        return { data: present(row) };
      },
    }),
    route({
      method: 'delete',
      path: '/templates/:id/draft',
      operationId: 'discardTemplateDraft',
      tag: 'Templates',
      summary: 'Discard the draft',
      description: '409 `INVALID_STATE` when there is no draft. The live version is unchanged.',
      auth: 'secret',
      params: IdParams,
      response: Template,
      status: 200,
      errors: [400, 401, 403, 404, 409, 429],
      handler: async ({ params, auth }) => {
        const done = await discardDraft(db, auth.projectId, params.id);
        if (!done) throw notFound('Template');
        if (done !== true) throw noDraft();
        return { data: present(await template(auth.projectId, params.id)) };
      },
    }),
  ];
}
