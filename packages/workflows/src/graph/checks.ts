/**
 * The checks every graph edit shares: a step's configuration and what it refers to in the project, the graph
 * rules ({@link graphProblems}) as field errors, and the trigger columns of a request's trigger (ours or
 * Plunk's).
 *
 * @module
 */
import { AppError, validationError, type FieldError } from '@mailroom/platform/errors';
import { missingTopics } from '@mailroom/contacts/queries/topics';
import { type WorkflowBranch, type WorkflowStepType } from '@mailroom/db/schema/workflow-states';
import { webhookUrlProblem } from '@mailroom/webhooks/webhooks';
import { senderError } from '@mailroom/mail/sender';
import { getTemplate } from '@mailroom/mail/queries/templates';
import { getVersion } from '@mailroom/mail/queries/template-versions';
import { type WorkflowGraph, type WorkflowRow, type WorkflowStepRow } from '../queries/workflows';
import { type DbOrTx } from '@mailroom/db/client';
import { graphProblems, parseStepConfig, type GraphProblem } from '../workflows';
import { resolveTrigger } from '../workflows-plunk-graph';

/** The stored trigger columns of a request's trigger (ours or Plunk's). @throws 422 naming the field. */
export function triggerColumns(
  body: Parameters<typeof resolveTrigger>[0],
  current?: WorkflowRow,
): { triggerType: 'EVENT' | 'MANUAL'; triggerEvent: string | null } | undefined {
  const t = resolveTrigger(body, current && { type: current.triggerType, event: current.triggerEvent });
  return t && { triggerType: t.type, triggerEvent: t.event };
}

/**
 * Checks a step's configuration: its schema, and what it refers to in the project (a SEND_EMAIL template of this
 * project with a sender on a verified domain; a WEBHOOK URL on a public host unless the operator allows private
 * targets). @returns the normalized configuration. @throws 422.
 */
export async function checkStep(
  db: DbOrTx,
  projectId: string,
  type: WorkflowStepType,
  config: unknown,
  field: string,
  allowPrivate: boolean,
): Promise<Record<string, unknown>> {
  const value = parseStepConfig(type, config, field) as Record<string, unknown>;
  if (type === 'WEBHOOK') {
    const problem = webhookUrlProblem(value.url as string, allowPrivate);
    if (problem) throw validationError([{ field: `${field}.url`, message: problem, code: 'invalid_string' }]);
  }
  if (type === 'SEND_EMAIL') {
    const template = await getTemplate(db, projectId, value.templateId as string);
    if (!template)
      throw validationError([
        { field: `${field}.templateId`, message: 'no template with this id in this project', code: 'custom' },
      ]);
    const pinned =
      value.templateVersion === undefined ? undefined : await getVersion(db, template, value.templateVersion as number);
    if (value.templateVersion !== undefined && !pinned?.publishedAt) {
      throw validationError([
        {
          field: `${field}.templateVersion`,
          message: 'no published version with this number (a draft cannot be pinned)',
          code: 'custom',
        },
      ]);
    }
    const from = (value.from as string | undefined) ?? (pinned ?? template).from;
    if (!from)
      throw validationError([
        { field: `${field}.from`, message: 'is required: the template has no from address', code: 'invalid_type' },
      ]);
    const bad = await senderError(db, projectId, from, value.from ? `${field}.from` : `${field}.templateId`);
    if (bad) throw validationError([bad]);
    if (typeof value.topicId === 'string' && (await missingTopics(db, projectId, [value.topicId])).length > 0) {
      throw validationError([{ field: `${field}.topicId`, message: 'is not a topic of this project', code: 'custom' }]);
    }
  }
  return value;
}

/** Graph problems as field errors: `steps.<ref>` / `transitions.<ref>` / `graph`. */
export function graphErrors(
  problems: GraphProblem[],
  stepRef: (i: number) => string,
  transitionRef: (i: number) => string,
  whole: string,
): FieldError[] {
  return problems.map((p) => ({
    field: p.at === null ? whole : 'step' in p.at ? stepRef(p.at.step) : transitionRef(p.at.transition),
    message: p.message,
    code: 'custom' as const,
  }));
}

/** The stored graph's problems (enable, or edits of an enabled workflow), as errors on `steps.<id>`, `transitions.<id>`, `graph`. */
export function storedGraphErrors(g: Pick<WorkflowGraph, 'steps' | 'transitions'>): FieldError[] {
  const problems = graphProblems(
    g.steps.map((s) => ({ ref: s.id, type: s.type })),
    g.transitions.map((t) => ({ from: t.fromStepId, to: t.toStepId, branch: t.branch as WorkflowBranch })),
  );
  return graphErrors(
    problems,
    (i) => `steps.${g.steps[i].id}`,
    (i) => `transitions.${g.transitions[i].id}`,
    'graph',
  );
}

/** Re-checks every step's references (a template may have been deleted or changed since), as errors on `steps.<id>.config…`. */
export async function stepRefErrors(
  db: DbOrTx,
  projectId: string,
  steps: WorkflowStepRow[],
  allowPrivate: boolean,
): Promise<FieldError[]> {
  const errors: FieldError[] = [];
  for (const s of steps) {
    try {
      await checkStep(db, projectId, s.type, s.config, `steps.${s.id}.config`, allowPrivate);
    } catch (err) {
      if (err instanceof AppError && err.options.errors) errors.push(...err.options.errors);
      else throw err;
    }
  }
  return errors;
}
