/**
 * Campaign mail for the benches that drain it (`worker` with `BENCH_WORKER_MAIL` naming `campaign`, and
 * `campaign-delivery`): a project of its own with `count` subscribed contacts, and a campaign to ALL of them started
 * as the API starts one. The fan-out and the feeding of the send queue are left to the worker's `campaign` job, so
 * these benches measure campaign mail through whatever path that job takes.
 *
 * @module
 */
import { sql } from 'drizzle-orm';
import type { Config } from '@mailroom/config/config';
import type { Database } from '@mailroom/db/client';
import { createLogger } from '@mailroom/platform/logger';
import { createRedis } from '@mailroom/queues/connection';
import { createQueues } from '@mailroom/queues/create';
import { addDomain, createProject, type CreatedProject } from '@mailroom/projects/queries/projects';
import { createDraft, sendableCampaign, sendOrSchedule } from '@mailroom/campaigns/lifecycle';

/** A bench project with its verified sending domain. */
export type BenchProject = CreatedProject & { domain: string };

/** The campaign the benches send: subject and body rendered per contact (`{{name}}` from the contact's data). */
export const BENCH_CAMPAIGN = { subject: 'News for {{name}}', body: '<p>Hello {{name}}, here is our news.</p>' };

/**
 * A new project (named `name`) with a verified domain and `count` subscribed contacts `<prefix><i>@bench.test`
 * (i = 1…count, `data.name` set), inserted in one statement, then `ANALYZE contacts` (as autovacuum would).
 */
export async function seededProject(
  database: Database,
  name: string,
  count: number,
  prefix: string,
): Promise<BenchProject> {
  const p = await createProject(database.db, name);
  const domain = `${name}-${Date.now()}.example.com`;
  await addDomain(database.db, p.id, domain, true);
  await database.db.execute(sql`
    insert into contacts (id, project_id, email, email_key, subscribed, data)
    select mailroom_uuid_v7(now() + make_interval(secs => i / 1000.0)), ${p.id}::uuid,
      ${prefix} || i || '@bench.test', ${prefix} || i || '@bench.test', true, jsonb_build_object('name', 'Ann ' || i)
    from generate_series(1, ${count}) as i`);
  await database.db.execute(sql`analyze contacts`);
  return { ...p, domain };
}

/**
 * Creates a campaign to ALL of `p`'s subscribed contacts and starts it as `POST /campaigns/{id}/send` does
 * (`sendableCampaign`, then `sendOrSchedule`: SENDING, and the campaign's job added to the campaign queue under
 * `config`'s queue prefix). No worker needs to run yet: the job waits in Redis for one.
 *
 * @returns the campaign's id.
 */
export async function startCampaign(config: Config, database: Database, p: BenchProject): Promise<string> {
  const draft = await createDraft(database.db, p.id, {
    name: 'bench',
    subject: BENCH_CAMPAIGN.subject,
    body: BENCH_CAMPAIGN.body,
    fromEmail: `news@${p.domain}`,
    audienceType: 'ALL',
  });
  await sendableCampaign(database.db, p.id, draft.id);
  const redis = createRedis(config, 'producer');
  await new Promise((r) => redis.once('ready', r));
  const queues = createQueues(config, redis);
  try {
    await sendOrSchedule({ database, queues, config }, createLogger(config, 'bench'), p.id, draft.id, null, false);
  } finally {
    await queues.closeAll();
    redis.disconnect();
  }
  return draft.id;
}
