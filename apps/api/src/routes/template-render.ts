/**
 * Template previews: `POST /templates/{id}/render` (a stored template) and `POST /templates/render` (sources given
 * inline). Both render with the one template implementation the worker uses (`renderContent`), against the
 * context the worker builds for an email (`renderContext`): the contact's `email` and stored data (with `contactId`),
 * then `data` over it (`{ value, persistent }` values unwrapped, as `/v1/send` does), then the platform's
 * `unsubscribeUrl` (a preview link here; each email gets its own signed one) and, with a contact, `plunk_id` and
 * `plunk_email`. Nothing is stored or sent.
 *
 * `missingVariables` lists the variables the template uses (read from the engine's parse tree) that this context
 * lacks (absent or null) and that have no `??` default: what would render empty.
 *
 * @module
 */
import { Type, type Static } from '@sinclair/typebox';
import { missingVariables } from '@mailroom/mail/template-variables';
import { notFound, validationError } from '@mailroom/platform/errors';
import {
  ContentRenderError,
  renderContent,
  renderContext,
  splitVariables,
  templateSyntaxErrors,
  type BodyFormat,
} from '@mailroom/mail/templates';
import { contentLimitErrors } from '@mailroom/mail/content-limits';
import { unsubscribeUrl } from '@mailroom/mail/unsubscribe';
import { type Config } from '@mailroom/config/config';
import { getContact } from '@mailroom/contacts/queries/contacts';
import { getTemplate } from '@mailroom/mail/queries/templates';
import { getVersion } from '@mailroom/mail/queries/template-versions';
import { type DbOrTx } from '@mailroom/db/client';
import { route } from '../http/route';
import type { AppDeps } from '../http/context';
import { IdParams, StringEnum } from './common';

const RenderInputs = {
  data: Type.Optional(
    Type.Record(Type.String(), Type.Unknown(), {
      description:
        "template variables, as /v1/send takes them (`{ value, persistent: false }` values are unwrapped); they win over the contact's data",
    }),
  ),
  contactId: Type.Optional(
    Type.String({
      format: 'uuid',
      description: 'a contact of the project: its `email` and stored data are merged under `data`',
    }),
  ),
};

const VersionField = Type.Integer({
  minimum: 1,
  maximum: 2_147_483_647,
  description: 'render this version (published or the draft) instead of the live one',
});

const RenderTemplateBody = Type.Object(
  { ...RenderInputs, version: Type.Optional(VersionField) },
  { additionalProperties: false },
);
const RenderTemplateQuery = Type.Object({ version: Type.Optional(VersionField) }, { additionalProperties: false });

const RenderInlineBody = Type.Object(
  {
    subject: Type.String({ minLength: 1, maxLength: 998, description: 'subject template' }),
    body: Type.String({
      minLength: 1,
      maxLength: 2_000_000,
      description:
        'body template: HTML, or Markdown with format=markdown; the limits of /v1/send `body` apply (nesting depth, Markdown paragraphs)',
    }),
    format: Type.Optional(StringEnum(['html', 'markdown'] as const, 'body format (default html)')),
    ...RenderInputs,
  },
  { additionalProperties: false },
);

const Rendered = Type.Object({
  subject: Type.String({ description: 'the rendered subject (plain text)' }),
  html: Type.String({ description: 'the rendered HTML body' }),
  text: Type.String({ description: 'the plain-text alternative, as the email carries it' }),
  missingVariables: Type.Array(Type.String(), {
    description:
      'dotted paths the template uses that neither data nor the contact provides (absent or null) and that have no `?? default`',
  }),
});

/** What a preview renders: template sources and the request's variables. */
interface Preview {
  subject: string;
  body: string;
  format: BodyFormat;
  data?: Record<string, unknown>;
  contactId?: string;
}

/**
 * Renders a preview for a project (see the module notes for the context).
 *
 * @throws {@link AppError} 404 (`contactId` not a contact of this project), 422 naming `subject` or `body` when a
 *   source does not parse, is too long or nests too deep (content-limits.ts).
 */
export async function renderPreview(
  db: DbOrTx,
  config: Config,
  projectId: string,
  p: Preview,
): Promise<Static<typeof Rendered>> {
  const contact = p.contactId !== undefined ? await getContact(db, projectId, p.contactId) : undefined;
  if (p.contactId !== undefined && !contact) throw notFound('Contact');
  const errors = [
    ...templateSyntaxErrors({ subject: p.subject, body: p.body }),
    ...contentLimitErrors({ subject: p.subject, body: p.body }, p.format),
  ];
  if (errors.length > 0) throw validationError(errors);
  const context = renderContext({
    contact: contact ? { id: contact.id, email: contact.email, data: contact.data } : undefined,
    variables: splitVariables(p.data).render,
    unsubscribeUrl: unsubscribeUrl(config.publicUrl, 'preview'),
  });
  let content: ReturnType<typeof renderContent>;
  try {
    content = renderContent({ subject: p.subject, body: p.body, format: p.format }, context);
  } catch (err) {
    // A raw `{{{var}}}` value may nest deeper than the sources do.
    if (err instanceof ContentRenderError)
      throw validationError([{ field: 'body', message: err.message, code: 'too_big' }]);
    throw err;
  }
  return { ...content, missingVariables: missingVariables([p.subject, p.body], context) };
}

const description =
  "Renders with the worker's implementation against the context an email would have: the contact's `email` and data " +
  '(`contactId`), `data` over it, and `unsubscribeUrl` (a preview link). `missingVariables` names the variables the ' +
  'template uses that this context lacks and that have no `?? default` (they would render empty). Nothing is stored or sent.';

/** Routes of this module. */
export function templateRenderRoutes(deps: AppDeps) {
  const { db } = deps.database;
  return [
    route({
      method: 'post',
      path: '/templates/render',
      operationId: 'renderTemplateInline',
      tag: 'Templates',
      summary: 'Render template sources given inline (preview)',
      description,
      auth: 'secret',
      body: RenderInlineBody,
      response: Rendered,
      status: 200,
      errors: [400, 401, 403, 404, 413, 422, 429],
      handler: async ({ body, auth }) => ({
        data: await renderPreview(db, deps.config, auth.projectId, { ...body, format: body.format ?? 'html' }),
      }),
    }),
    route({
      method: 'post',
      path: '/templates/:id/render',
      operationId: 'renderTemplate',
      tag: 'Templates',
      summary: 'Render a stored template (preview)',
      description: `${description} \`version\` (query or body) renders that version, published or the draft; default the live one.`,
      auth: 'secret',
      params: IdParams,
      query: RenderTemplateQuery,
      body: RenderTemplateBody,
      response: Rendered,
      status: 200,
      errors: [400, 401, 403, 404, 413, 422, 429],
      handler: async ({ params, query, body, auth }) => {
        const template = await getTemplate(db, auth.projectId, params.id);
        if (!template) throw notFound('Template');
        const { version: bodyVersion, ...inputs } = body;
        if (bodyVersion !== undefined && query.version !== undefined && bodyVersion !== query.version) {
          throw validationError([
            { field: 'version', message: 'give the version once (query or body), or the same in both', code: 'custom' },
          ]);
        }
        const n = bodyVersion ?? query.version;
        const source = n === undefined ? template : await getVersion(db, template, n);
        if (!source)
          throw validationError([{ field: 'version', message: `the template has no version ${n}`, code: 'custom' }]);
        return {
          data: await renderPreview(db, deps.config, auth.projectId, {
            subject: source.subject,
            body: source.body,
            format: 'html',
            ...inputs,
          }),
        };
      },
    }),
  ];
}
