/**
 * The SES account's figures as Prometheus gauges on the worker's registry, read at scrape time from the
 * {@link AccountWatcher} of each delivery connection:
 *
 * - `mailroom_ses_max_send_rate` (the account's maximum, emails/s) and `mailroom_send_rate` (the rate the workers
 *   keep: the account's, capped by `SES_MAX_SEND_RATE`);
 * - `mailroom_ses_max_24h_send` (the 24-hour quota; -1 when unlimited) and `mailroom_ses_sent_last_24h` (the last
 *   reading plus this deployment's sends since);
 * - `mailroom_ses_quota_pause_at` (campaigns pause at this count) and `mailroom_ses_sending_enabled` (0 or 1);
 * - `mailroom_ses_account_read_age_seconds` (since the last successful reading) and
 *   `mailroom_ses_account_read_ok` (0 when the last attempt failed).
 *
 * Each series carries the delivery connection's name (`connection`: `default`, or a `SES_CONNECTIONS` name).
 * Nothing is exported before the first successful reading except the rate and `read_ok`.
 *
 * @module
 */
import { Gauge, type Registry } from 'prom-client';
import { quotaState } from '@mailroom/mail/ses-account';
import type { AccountEstimate, AccountWatcher } from './account';

/**
 * Registers the account gauges on `registry`, one series per delivery connection (label `connection`).
 *
 * @param watchers - each connection's watcher, by connection name.
 */
export function registerAccountMetrics(
  registry: Registry,
  watchers: ReadonlyMap<string, AccountWatcher>,
  reserve: number,
): void {
  // One estimate per connection per scrape, shared by the gauges (prom-client collects them concurrently).
  const snapshots = new Map<string, { at: number; value: Promise<AccountEstimate | undefined> }>();
  const current = (name: string, watcher: AccountWatcher) => {
    let snapshot = snapshots.get(name);
    if (!snapshot || Date.now() - snapshot.at > 500)
      snapshots.set(name, (snapshot = { at: Date.now(), value: watcher.estimate() }));
    return snapshot.value;
  };
  const labelNames = ['connection'] as const;
  const gauge = (name: string, help: string, read: (a: AccountEstimate) => number) =>
    new Gauge({
      name,
      help,
      labelNames,
      registers: [registry],
      async collect() {
        for (const [connection, watcher] of watchers) {
          const account = await current(connection, watcher);
          if (account) this.set({ connection }, read(account));
        }
      },
    });
  new Gauge({
    name: 'mailroom_send_rate',
    help: "the send rate the workers keep per delivery connection (emails/s): the account's maximum, capped by SES_MAX_SEND_RATE (or the connection's maxSendRate)",
    labelNames,
    registers: [registry],
    collect() {
      for (const [connection, watcher] of watchers) this.set({ connection }, watcher.rate);
    },
  });
  new Gauge({
    name: 'mailroom_ses_account_read_ok',
    help: '1 when the last SES account reading succeeded, 0 when it failed',
    labelNames,
    registers: [registry],
    collect() {
      for (const [connection, watcher] of watchers) this.set({ connection }, watcher.error === undefined ? 1 : 0);
    },
  });
  gauge('mailroom_ses_max_send_rate', "the SES account's maximum send rate (emails/s)", (a) => a.maxSendRate);
  gauge('mailroom_ses_max_24h_send', "the SES account's 24-hour quota (emails; -1 = unlimited)", (a) =>
    Number.isFinite(a.max24HourSend) ? a.max24HourSend : -1,
  );
  gauge(
    'mailroom_ses_sent_last_24h',
    "emails sent in the last 24 hours: the last SES reading plus this deployment's sends since",
    (a) => a.sentLast24Hours,
  );
  gauge(
    'mailroom_ses_quota_pause_at',
    'sent-in-24-hours count at which campaigns pause (the quota less SES_QUOTA_RESERVE; -1 = never)',
    (a) => {
      const at = quotaState(a, reserve).pauseAt;
      return Number.isFinite(at) ? at : -1;
    },
  );
  gauge('mailroom_ses_sending_enabled', '1 while SES reports sending enabled for the account', (a) =>
    a.sendingEnabled ? 1 : 0,
  );
  gauge(
    'mailroom_ses_account_read_age_seconds',
    'time since the last successful SES account reading (s)',
    (a) => (Date.now() - a.readAt.getTime()) / 1000,
  );
}
