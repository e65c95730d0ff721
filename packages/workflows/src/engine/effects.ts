/**
 * The pieces of the workflow engine's steps that do not move the execution (run.ts runs the steps and decides
 * what follows): the email row a SEND_EMAIL step writes and the HTTP call of a WEBHOOK step.
 *
 * WEBHOOK: the request carries the step run's id as `Idempotency-Key` and as the Standard Webhooks `webhook-id`, signed
 * with the project's workflow secret, the same on every attempt, so a receiver can recognise a call repeated after
 * a crash. The body is the step's JSON template rendered against the execution (strings JSON-escaped), or a
 * default `{ type: 'workflow.webhook', … }` envelope; a test execution's calls say `test: true`.
 *
 * @module
 */
import { storedTags } from '@mailroom/platform/email-tags';
import { newWebhookSecret, sendHttp, signWebhook } from '@mailroom/webhooks/webhooks';
import { renderJsonTemplate } from '@mailroom/mail/templates';
import type { WebhookConfig } from '@mailroom/webhooks/config';
import { type StepConfig } from '../workflows';
import { getContact } from '@mailroom/contacts/queries/contacts';
import { type ExecutionRow, type StepRunRow, type WorkflowStepRow } from '../queries/workflows';
import { workflowWebhookSecret } from '../queries/workflow-executions';
import { type contactForSend } from '../queries/step-reads';
import { type getTemplate } from '@mailroom/mail/queries/templates';
import { type DbOrTx } from '@mailroom/db/client';
import { type NewEmail } from '@mailroom/db/queries/queued-emails';

/** The email row of a SEND_EMAIL step, and what it is made from. */
export function workflowEmailRow(a: {
  id: string;
  execution: ExecutionRow;
  run: StepRunRow;
  template: NonNullable<Awaited<ReturnType<typeof getTemplate>>>;
  contact: NonNullable<Awaited<ReturnType<typeof contactForSend>>>;
  cfg: StepConfig<'SEND_EMAIL'>;
  from: string;
}): Omit<NewEmail, 'tracking'> & { id: string; tracking: boolean | null } {
  const { execution: x, template, cfg } = a;
  return {
    id: a.id,
    projectId: x.projectId,
    contactId: x.contactId,
    templateId: template.id,
    templateVersion: template.version,
    workflowExecutionId: x.id,
    workflowStepRunId: a.run.id,
    marketing: template.type === 'MARKETING',
    // The template's tracking, else the project's mode for the template's stream (resolved by the insert).
    tracking: template.tracking ?? null,
    // A topic is marketing's business: a TRANSACTIONAL template's email ignores the step's topic.
    topicId: template.type === 'MARKETING' ? (cfg.topicId ?? null) : null,
    source: 'workflow',
    toEmail: a.contact.email,
    fromEmail: a.from,
    fromName: cfg.fromName ?? template.fromName,
    replyTo: cfg.replyTo ?? template.replyTo,
    subject: template.subject,
    body: template.body,
    bodyFormat: 'html',
    variables: {
      ...(cfg.data ?? {}),
      trigger: (x.context.trigger as { data?: unknown } | undefined)?.data ?? {},
      event: (x.context.event as { data?: unknown } | undefined)?.data ?? {},
    },
    // A test execution's email is a test email: the send processor delivers it to the sink, never to SES.
    test: x.test,
    tags: storedTags(cfg.tags),
  };
}

/** What one attempt produced: `output` is stored on the step run either way. */
export type StepWebhookResult =
  | { ok: true; output: Record<string, unknown>; webhook: { statusCode: number; body: unknown } }
  | { ok: false; output: Record<string, unknown>; error: string; refused: boolean };

/**
 * Makes one attempt of a WEBHOOK step. A 2xx answer is `ok` (its body parsed as JSON when it is JSON, else kept as
 * text); anything else, a timeout (`timeoutMs`) or a network error is not. `refused` means the target itself is
 * not allowed (a private address without `WEBHOOK_ALLOW_PRIVATE_TARGETS`): retrying cannot help.
 */
export async function callStepWebhook(
  db: DbOrTx,
  config: Pick<WebhookConfig, 'webhookAllowPrivateTargets'>,
  a: {
    execution: ExecutionRow;
    run: StepRunRow;
    step: WorkflowStepRow;
    cfg: StepConfig<'WEBHOOK'>;
    attempt: number;
    timeoutMs: number;
  },
): Promise<StepWebhookResult> {
  const { execution: x, run, step, cfg, attempt, timeoutMs } = a;
  const [secret, contact] = await Promise.all([
    workflowWebhookSecret(db, x.projectId, newWebhookSecret),
    getContact(db, x.projectId, x.contactId),
  ]);
  const contactView = contact
    ? { id: contact.id, email: contact.email, subscribed: contact.subscribed, data: contact.data }
    : { id: x.contactId };
  const method = cfg.method ?? 'POST';
  const withBody = method !== 'GET' && method !== 'DELETE';
  // A test execution still calls the URL (the user's own endpoint), and says it is a test.
  const ids = {
    workflowId: x.workflowId,
    executionId: x.id,
    stepId: step.id,
    stepRunId: run.id,
    ...(x.test ? { test: true } : {}),
  };
  const body = !withBody
    ? ''
    : cfg.body !== undefined
      ? renderJsonTemplate(cfg.body, {
          ...ids,
          test: x.test,
          contact: contactView,
          trigger: (x.context.trigger as { data?: unknown })?.data ?? {},
          event: (x.context.event as { data?: unknown })?.data ?? {},
          context: x.context,
        })
      : JSON.stringify({ type: 'workflow.webhook', ...ids, contact: contactView, context: x.context });
  const headers = {
    ...(cfg.headers ?? {}),
    'idempotency-key': run.id,
    ...signWebhook(secret, run.id, new Date(), body),
  };
  const res = await sendHttp(cfg.url, {
    method,
    headers,
    body,
    timeoutMs,
    allowPrivate: config.webhookAllowPrivateTargets,
  });
  const output = {
    statusCode: res.statusCode ?? null,
    response: res.body ?? null,
    durationMs: res.durationMs,
    attempts: attempt,
  };
  if (res.statusCode !== undefined && res.statusCode >= 200 && res.statusCode < 300) {
    let parsed: unknown = res.body ?? null;
    try {
      parsed = JSON.parse(res.body ?? '');
    } catch {
      // Not JSON: kept as text.
    }
    return { ok: true, output, webhook: { statusCode: res.statusCode, body: parsed } };
  }
  return {
    ok: false,
    output,
    error: res.error ?? `HTTP ${res.statusCode}`,
    refused: res.error?.startsWith('refused') ?? false,
  };
}
