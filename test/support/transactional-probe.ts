/**
 * A transactional email sent while something else keeps the worker busy (a campaign, another project's burst), and
 * when SES received it: how long urgent mail waits behind the rest.
 */
import type { Express } from 'express';
import { client, recipient, sesSendsTo, waitFor, type TestProject } from './harness';
import type { RecordedSend } from './ses-recorder';

/**
 * Sends one transactional email from `project` through `POST /v1/send` and waits (at most `timeoutMs`, default
 * 20 s) until SES has it.
 *
 * @returns when the API accepted it (its `timestamp`, epoch ms) and its send as SES recorded it.
 */
export async function transactionalProbe(
  app: Express,
  project: TestProject,
  tag: string,
  timeoutMs = 20_000,
): Promise<{ acceptedAt: number; send: RecordedSend }> {
  const to = recipient(tag);
  const accepted = await client(app, project).post('/v1/send', {
    to,
    from: `alerts@${project.domain}`,
    subject: 'Your code',
    body: '<p>123456</p>',
  });
  expect(accepted.status).toBe(202);
  const acceptedAt = Date.parse(accepted.body.data.timestamp as string);
  const [send] = await waitFor(
    async () => {
      const s = await sesSendsTo([to]);
      return s.length ? s : undefined;
    },
    timeoutMs,
    'transactional email at SES',
  );
  return { acceptedAt, send };
}
