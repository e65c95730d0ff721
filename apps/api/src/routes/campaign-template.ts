/**
 * Campaigns written from a template: `templateId` (and optionally `templateVersion`, a pinned published version)
 * on create and update. The campaign's `subject` and `body` are copied from the template's version when the
 * campaign is created or edited, and again when it is sent or scheduled, so an unpinned campaign sends the latest
 * version published before that moment and a pinned one always its version (`contentVersion` records which; each
 * email records it as `templateVersion`). After that the content is the campaign's own, as for any campaign.
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import { validationError, type FieldError } from '@mailroom/platform/errors';
import { getTemplate } from '@mailroom/mail/queries/templates';
import { pinnedTemplate } from '@mailroom/mail/queries/template-versions';
import { updateCampaign, type CampaignRow, type NewCampaign } from '@mailroom/campaigns/queries/campaigns';
import type { DbOrTx } from '@mailroom/db/client';
import { Nullable } from './common';

/** The two request fields. */
export const CampaignTemplateFields = {
  templateId: Type.Optional(
    Nullable(
      Type.String({
        format: 'uuid',
        description:
          'write the subject and body from this template (then leave subject and body out); null detaches it',
      }),
    ),
  ),
  templateVersion: Type.Optional(
    Nullable(
      Type.Integer({
        minimum: 1,
        maximum: 2_147_483_647,
        description:
          'pin this published version of templateId; null or omitted: the latest published version when the campaign is sent',
      }),
    ),
  ),
};

type Given = { subject?: string; body?: string; templateId?: string | null; templateVersion?: number | null };

/**
 * The content columns of a create or update: copied from the template's version when the campaign has a template
 * (after the change), else as given.
 *
 * @param current - the campaign before an update; absent for a create.
 * @throws {@link AppError} 422 naming `templateId` (not a template of the project), `templateVersion` (no such
 *   published version, or given without a template), `subject` / `body` (given with a template, or missing without one).
 */
export async function contentColumns(
  db: DbOrTx,
  projectId: string,
  given: Given,
  current?: CampaignRow,
): Promise<Partial<NewCampaign>> {
  const templateId = given.templateId !== undefined ? given.templateId : (current?.templateId ?? null);
  const templateVersion =
    given.templateVersion !== undefined
      ? given.templateVersion
      : templateId === current?.templateId
        ? (current?.templateVersion ?? null)
        : null;
  const errors: FieldError[] = [];
  if (!templateId) {
    if (templateVersion !== null)
      errors.push({ field: 'templateVersion', message: 'applies to a campaign with a templateId', code: 'custom' });
    if (!current)
      for (const k of ['subject', 'body'] as const)
        if (given[k] === undefined)
          errors.push({ field: k, message: 'is required unless templateId is given', code: 'invalid_type' });
    if (errors.length > 0) throw validationError(errors);
    return given.templateId === null ? { templateId: null, templateVersion: null, contentVersion: null } : {};
  }
  for (const k of ['subject', 'body'] as const) {
    if (given[k] !== undefined)
      errors.push({
        field: k,
        message: 'comes from the template (templateId); set templateId to null to write it here',
        code: 'custom',
      });
  }
  if (errors.length > 0) throw validationError(errors);
  return { templateId, templateVersion, ...(await resolved(db, projectId, templateId, templateVersion)) };
}

async function resolved(
  db: DbOrTx,
  projectId: string,
  templateId: string,
  version: number | null,
): Promise<Pick<NewCampaign, 'subject' | 'body' | 'contentVersion'>> {
  const live = await getTemplate(db, projectId, templateId);
  if (!live)
    throw validationError([
      { field: 'templateId', message: 'no template with this id in this project', code: 'custom' },
    ]);
  const t = version === null ? live : await pinnedTemplate(db, live, version);
  if (!t)
    throw validationError([
      { field: 'templateVersion', message: `the template has no published version ${version}`, code: 'custom' },
    ]);
  return { subject: t.subject, body: t.body, contentVersion: t.version };
}

/**
 * Copies the template's content into a campaign about to be sent or scheduled (DRAFT or SCHEDULED): the pinned
 * version, or the one live now. A campaign without a template (or whose template was deleted) is unchanged.
 * @returns the campaign as it is now.
 */
export async function refreshContent(db: DbOrTx, c: CampaignRow): Promise<CampaignRow> {
  if (!c.templateId) return c;
  const t = await updateCampaign(
    db,
    c.projectId,
    c.id,
    await resolved(db, c.projectId, c.templateId, c.templateVersion),
  );
  return t.ok ? t.campaign : c;
}
