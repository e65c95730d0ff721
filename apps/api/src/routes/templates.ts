/**
 * Templates: `POST/GET/PATCH/DELETE /templates[/{id}]`. The list carries both forms of docs/api/overview.md: keyset
 * (`items`, `nextCursor`, `hasMore`, `total`) and the reference page form (`templates`, `page`, `pageSize`,
 * `totalPages`); `page` (and Plunk's `pageSize`) is accepted instead of `cursor`.
 *
 * Plunk v2 compatibility: `description` is stored and answered; `from` and `replyTo` may be mailbox strings
 * (`Acme <hello@acme.com>`): the display name of `from` becomes `fromName` unless `fromName` is given, and the
 * reply-to keeps its name.
 *
 * Versions (`template-versions.ts` has their routes): every content change is a version. `PATCH` edits the live
 * content at once (a new published version), as Plunk clients expect; `PATCH ?draft=true` writes the draft
 * instead, which `POST /templates/{id}/publish` makes live (docs/decisions/0131-template-versions.md).
 *
 * @module
 */
import { Type, type Static } from '@sinclair/typebox';
import { decodeCursor, encodeCursor } from '@mailroom/platform/ids';
import { MAILBOX_MAX_LENGTH, senderFields } from '@mailroom/platform/address';
import { AppError, ErrorCode, notFound, validationError } from '@mailroom/platform/errors';
import { addressString } from '@mailroom/platform/validation';
import { templateSyntaxErrors } from '@mailroom/mail/templates';
import { contentLimitErrors } from '@mailroom/mail/content-limits';
import {
  createTemplate,
  deleteTemplate,
  getTemplate,
  listTemplates,
  type TemplateRow,
} from '@mailroom/mail/queries/templates';
import { draftNumbers, editLive, writeDraft } from '@mailroom/mail/queries/template-versions';
import { route } from '../http/route';
import { readDb, type AppDeps } from '../http/context';
import { Deleted, IdParams, Nullable, PageFields, PageQuery, StringEnum, Timestamp } from './common';

const TemplateType = StringEnum(['TRANSACTIONAL', 'MARKETING'] as const, 'TRANSACTIONAL or MARKETING');

const fields = {
  name: Type.String({ minLength: 1, maxLength: 200 }),
  description: Nullable(
    Type.String({ maxLength: 2000, description: "free text for people (Plunk v2's field); never rendered" }),
  ),
  subject: Type.String({ minLength: 1, maxLength: 998, description: 'subject template' }),
  body: Type.String({
    minLength: 1,
    maxLength: 2_000_000,
    description:
      'HTML body template: {{var}} escaped (a script or data URL from a variable becomes #), {{{var}}} raw, {{var ?? default}}; ' +
      'at most 200 levels of nested elements (422 naming the field)',
  }),
  type: TemplateType,
  from: Nullable(
    addressString('mailbox', {
      maxLength: MAILBOX_MAX_LENGTH,
      description:
        'sender address, or a mailbox string such as "Acme <hello@acme.com>" (Plunk v2\'s form): the display name becomes fromName ' +
        'unless fromName is given. An internationalised domain is stored in punycode',
    }),
  ),
  fromName: Nullable(Type.String({ maxLength: 200, description: 'sender name; wins over a display name in from' })),
  replyTo: Nullable(
    addressString('mailbox', {
      maxLength: MAILBOX_MAX_LENGTH,
      description: 'reply-to address, or a mailbox string such as "Support <help@acme.com>" (kept with its name)',
    }),
  ),
  tracking: Nullable(
    Type.Boolean({
      description:
        "open and click tracking of this template's mail; null: the project's `trackingMode` decides. A send's own `tracking` wins",
    }),
  ),
};

const CreateTemplate = Type.Object(
  {
    name: fields.name,
    description: Type.Optional(fields.description),
    subject: fields.subject,
    body: fields.body,
    type: Type.Optional(fields.type),
    from: Type.Optional(fields.from),
    fromName: Type.Optional(fields.fromName),
    replyTo: Type.Optional(fields.replyTo),
    tracking: Type.Optional(fields.tracking),
  },
  { additionalProperties: false },
);
const PatchQuery = Type.Object(
  {
    draft: Type.Optional(
      Type.Boolean({ description: 'write the draft instead of publishing at once (default false)' }),
    ),
  },
  { additionalProperties: false },
);

const UpdateTemplate = Type.Partial(Type.Object(fields), { additionalProperties: false, minProperties: 1 });

export const Template = Type.Object({
  id: Type.String(),
  projectId: Type.String({ description: "the template's project (Plunk's field)" }),
  name: Type.String(),
  description: Nullable(Type.String()),
  subject: Type.String(),
  body: Type.String(),
  type: TemplateType,
  from: Nullable(Type.String({ description: 'the sender address (its display name is in fromName)' })),
  fromName: Nullable(Type.String()),
  replyTo: Nullable(Type.String()),
  tracking: Nullable(Type.Boolean({ description: "null: the project's `trackingMode` decides" })),
  version: Type.Integer({
    minimum: 1,
    description: 'the live (published) version: what /v1/send and unpinned steps use',
  }),
  draftVersion: Nullable(
    Type.Integer({ minimum: 1, description: 'the number of the draft (PATCH ?draft=true), or null' }),
  ),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

const ListQuery = Type.Object(
  {
    ...PageQuery,
    page: Type.Optional(Type.Integer({ minimum: 1, maximum: 100_000, description: 'page number, instead of cursor' })),
    pageSize: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, description: "Plunk's name for `limit`" })),
    type: Type.Optional(TemplateType),
    search: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description: 'case-insensitive match in name, description or subject',
      }),
    ),
  },
  { additionalProperties: false },
);

const TemplateList = Type.Object({
  items: Type.Array(Template),
  ...PageFields,
  templates: Type.Array(Template, { description: 'same as items (reference form)' }),
  page: Type.Integer(),
  pageSize: Type.Integer(),
  totalPages: Type.Integer(),
});

/** A template as the API returns it; `draftVersion`: its draft's number (null: none). */
export function present(t: TemplateRow, draftVersion: number | null = null): Static<typeof Template> {
  return {
    id: t.id,
    projectId: t.projectId,
    name: t.name,
    description: t.description,
    subject: t.subject,
    body: t.body,
    type: t.type,
    from: t.from,
    fromName: t.fromName,
    replyTo: t.replyTo,
    tracking: t.tracking,
    version: t.version,
    draftVersion,
    createdAt: t.createdAt.toISOString(),
    updatedAt: t.updatedAt.toISOString(),
  };
}

/** Syntax, sizes and nesting depth (content-limits.ts) of the sources given; 422 naming `subject` or `body`. */
export function checkSyntax(input: { subject?: string; body?: string }): void {
  const errors = [
    ...templateSyntaxErrors({ subject: input.subject, body: input.body }),
    ...contentLimitErrors(input, 'html'),
  ];
  if (errors.length) throw validationError(errors);
}

/** Routes of this module. */
export function templateRoutes(deps: AppDeps) {
  const { db } = deps.database;
  /** Lists, searches and stats: a replica when one is usable (see `@mailroom/db/replicas`). */
  const reads = readDb(deps);
  return [
    route({
      method: 'post',
      path: '/templates',
      operationId: 'createTemplate',
      tag: 'Templates',
      summary: 'Create a template',
      auth: 'secret',
      example: {
        name: 'Welcome',
        subject: 'Welcome, {{name}}',
        body: '<p>Hi {{name}}, welcome aboard.</p>',
        type: 'TRANSACTIONAL',
      },
      body: CreateTemplate,
      response: Template,
      status: 201,
      errors: [400, 401, 403, 422, 429],
      handler: async ({ body, auth }) => {
        checkSyntax(body);
        const row = await createTemplate(db, auth.projectId, {
          ...senderFields(body),
          type: body.type ?? 'TRANSACTIONAL',
        });
        return { data: present(row) };
      },
    }),
    route({
      method: 'get',
      path: '/templates',
      operationId: 'listTemplates',
      tag: 'Templates',
      summary: 'List templates, newest first',
      auth: 'secret',
      query: ListQuery,
      response: TemplateList,
      status: 200,
      errors: [400, 401, 403, 429],
      handler: async ({ query, auth }) => {
        const afterId = query.cursor ? decodeCursor(query.cursor) : undefined;
        const limit = query.pageSize ?? query.limit;
        const result = await listTemplates(reads, auth.projectId, {
          limit,
          afterId,
          page: query.page,
          type: query.type,
          search: query.search,
        });
        const drafts = await draftNumbers(
          reads,
          auth.projectId,
          result.items.map((t) => t.id),
        );
        const items = result.items.map((t) => present(t, drafts.get(t.id) ?? null));
        const last = result.items[result.items.length - 1];
        return {
          data: {
            items,
            nextCursor: result.hasMore && last ? encodeCursor(last.id) : null,
            hasMore: result.hasMore,
            total: result.total,
            templates: items,
            page: Math.floor(result.before / limit) + 1,
            pageSize: limit,
            totalPages: Math.ceil(result.total / limit),
          },
        };
      },
    }),
    route({
      method: 'get',
      path: '/templates/:id',
      operationId: 'getTemplate',
      tag: 'Templates',
      summary: 'Get a template',
      auth: 'secret',
      params: IdParams,
      response: Template,
      status: 200,
      errors: [400, 401, 403, 404, 429],
      handler: async ({ params, auth }) => {
        const row = await getTemplate(db, auth.projectId, params.id);
        if (!row) throw notFound('Template');
        const drafts = await draftNumbers(db, auth.projectId, [row.id]);
        return { data: present(row, drafts.get(row.id) ?? null) };
      },
    }),
    route({
      method: 'patch',
      path: '/templates/:id',
      operationId: 'updateTemplate',
      tag: 'Templates',
      summary: 'Update a template',
      description:
        'Fields not sent are unchanged; null clears description, from, fromName or replyTo. A mailbox string in from sets fromName ' +
        'too, unless fromName is sent. Emails already queued keep the content they were accepted with. A change of subject, body ' +
        'or sender is a new version: without `draft` it is published at once (the next send uses it; 409 `INVALID_STATE` while a ' +
        'draft exists); with `?draft=true` it creates or updates the draft and the live version stays until POST ' +
        '/templates/{id}/publish. Name, description, type and tracking change at once either way.',
      auth: 'secret',
      params: IdParams,
      query: PatchQuery,
      body: UpdateTemplate,
      response: Template,
      status: 200,
      errors: [400, 401, 403, 404, 409, 422, 429],
      handler: async ({ params, query, body, auth }) => {
        checkSyntax(body);
        if (query.draft) {
          const written = await writeDraft(db, auth.projectId, params.id, senderFields(body));
          if (!written) throw notFound('Template');
          return { data: present(written.template, written.draft.version) };
        }
        const row = await editLive(db, auth.projectId, params.id, senderFields(body));
        if (!row) throw notFound('Template');
        if ('conflict' in row) {
          throw new AppError(
            ErrorCode.INVALID_STATE,
            'The template has a draft: edit it with ?draft=true and publish it, or discard it (DELETE /templates/{id}/draft) first',
          );
        }
        return { data: present(row) };
      },
    }),
    route({
      method: 'delete',
      path: '/templates/:id',
      operationId: 'deleteTemplate',
      tag: 'Templates',
      summary: 'Delete a template',
      description: 'Emails already queued from it are still sent with the content they were accepted with.',
      auth: 'secret',
      params: IdParams,
      response: Deleted,
      status: 200,
      errors: [400, 401, 403, 404, 429],
      handler: async ({ params, auth }) => {
        if (!(await deleteTemplate(db, auth.projectId, params.id))) throw notFound('Template');
        return { data: { id: params.id, deleted: true } };
      },
    }),
  ];
}
