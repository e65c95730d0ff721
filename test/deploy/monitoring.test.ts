/**
 * deploy/prometheus and deploy/grafana, checked with the tools that run them and against the real processes:
 * - `promtool check rules` and `promtool test rules` (every alert shown firing on its condition and quiet without
 *   it), `promtool check config` on the example configuration, and every dashboard query parsed by promtool too;
 * - every alert has a runbook entry in docs/self-hosting/monitoring.md;
 * - an API and a worker are started, one email is sent through them, both `/metrics` are scraped (with
 *   METRICS_TOKEN), and every metric named by the rules, the dashboard and the KEDA ScaledObject must be there, with
 *   the labels the queries select on.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import request from 'supertest';
import { parse } from 'yaml';
import { loadConfig } from '@mailroom/config/config';
import { startWorker, type RunningWorker } from '../../apps/worker/src/main';
import { client, createTestProject, recipient, startTestApi, testEnv, waitFor, type TestApi } from '../support/harness';
import { which } from '../support/provision';

const ROOT = path.resolve(__dirname, '..', '..');
const PROMETHEUS_DIR = path.join(ROOT, 'deploy', 'prometheus');
const METRICS_TOKEN = 'test-metrics-token-monitoring-0123';

interface Rule {
  alert: string;
  expr: string;
}
const rules = (parse(readFileSync(path.join(PROMETHEUS_DIR, 'alerts.yml'), 'utf8')) as { groups: { rules: Rule[] }[] }).groups.flatMap((g) => g.rules);
const dashboard = JSON.parse(readFileSync(path.join(ROOT, 'deploy', 'grafana', 'mailroom.json'), 'utf8')) as {
  uid: string;
  panels: { id: number; type: string; title: string; targets?: { expr: string; refId: string }[] }[];
  templating: { list: { name: string; type: string }[] };
};
const dashboardExprs = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })));
const kedaExprs = (parse(readFileSync(path.join(ROOT, 'deploy', 'kubernetes', 'base', 'worker-scaledobject.yaml'), 'utf8')) as {
  spec: { triggers: { metadata: { query: string } }[] };
}).spec.triggers.map((t) => t.metadata.query);

function promtool(args: string[], cwd = PROMETHEUS_DIR): { status: number | null; output: string } {
  const bin = which('promtool');
  if (!bin) throw new Error("promtool not found on PATH: test setup installs Debian's prometheus (apt-get install prometheus)");
  const r = spawnSync(bin, args, { cwd, encoding: 'utf8' });
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

describe('promtool', () => {
  test('check rules: the alert rules are valid', () => {
    const r = promtool(['check', 'rules', 'alerts.yml']);
    expect({ status: r.status, output: r.output }).toEqual({ status: 0, output: expect.stringContaining(`SUCCESS: ${rules.length} rules found`) });
  });

  test('test rules: every alert fires on its condition and stays quiet without it', () => {
    const r = promtool(['test', 'rules', 'alerts.test.yml']);
    expect({ status: r.status, output: r.output }).toEqual({ status: 0, output: expect.stringContaining('SUCCESS') });
    // Each alert has at least one case where it fires and one where it must not.
    const tests = (parse(readFileSync(path.join(PROMETHEUS_DIR, 'alerts.test.yml'), 'utf8')) as {
      tests: { alert_rule_test: { alertname: string; exp_alerts: unknown[] }[] }[];
    }).tests.flatMap((t) => t.alert_rule_test);
    for (const { alert } of rules) {
      const cases = tests.filter((t) => t.alertname === alert);
      expect({ alert, fires: cases.some((c) => c.exp_alerts.length > 0), quiet: cases.some((c) => c.exp_alerts.length === 0) }).toEqual({ alert, fires: true, quiet: true });
    }
  });

  test('check config: the example Prometheus configuration loads with the rules', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'mailroom-prometheus-'));
    try {
      // The token file the example names exists only in a real deployment: point it at a stand-in.
      const token = path.join(dir, 'token');
      writeFileSync(token, METRICS_TOKEN);
      const config = readFileSync(path.join(PROMETHEUS_DIR, 'prometheus.example.yml'), 'utf8').replaceAll('/etc/prometheus/secrets/mailroom-metrics-token', token);
      writeFileSync(path.join(dir, 'prometheus.yml'), config);
      copyFileSync(path.join(PROMETHEUS_DIR, 'alerts.yml'), path.join(dir, 'alerts.yml'));
      const r = promtool(['check', 'config', 'prometheus.yml'], dir);
      expect({ status: r.status, output: r.output }).toEqual({ status: 0, output: expect.stringContaining('SUCCESS') });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('every dashboard and KEDA query is valid PromQL', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'mailroom-dashboard-'));
    try {
      // promtool parses PromQL only inside rule files: one recording rule per query.
      const exprs = [...dashboardExprs.map((d) => d.expr), ...kedaExprs];
      const file = { groups: [{ name: 'dashboard', rules: exprs.map((expr, i) => ({ record: `dashboard:query_${i}`, expr })) }] };
      writeFileSync(path.join(dir, 'queries.yml'), JSON.stringify(file));
      const r = promtool(['check', 'rules', 'queries.yml'], dir);
      expect({ status: r.status, output: r.output }).toEqual({ status: 0, output: expect.stringContaining(`SUCCESS: ${exprs.length} rules found`) });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

test('the dashboard: one Prometheus data source variable, unique panel ids, a query on every graph', () => {
  expect(dashboard.uid).toBe('mailroom');
  expect(dashboard.templating.list).toEqual([expect.objectContaining({ name: 'datasource', type: 'datasource' })]);
  const ids = dashboard.panels.map((p) => p.id);
  expect(new Set(ids).size).toBe(ids.length);
  for (const p of dashboard.panels.filter((x) => x.type !== 'row')) expect({ panel: p.title, queries: (p.targets ?? []).length > 0 }).toEqual({ panel: p.title, queries: true });
  // What the dashboard must show.
  const all = dashboardExprs.map((d) => d.expr).join('\n');
  for (const metric of ['mailroom_send_rate', 'mailroom_queue_jobs', 'mailroom_queue_oldest_waiting_seconds', 'mailroom_http_request_duration_seconds_bucket', 'mailroom_ses_events_total', 'mailroom_campaigns_paused', 'mailroom_db_pool_connections']) {
    expect(all).toContain(metric);
  }
});

test('every alert has a runbook entry in docs/self-hosting/monitoring.md', () => {
  const doc = readFileSync(path.join(ROOT, 'docs', 'self-hosting', 'monitoring.md'), 'utf8');
  for (const { alert } of rules) expect({ alert, documented: new RegExp(`^#+ ${alert}$`, 'm').test(doc) }).toEqual({ alert, documented: true });
});

/** Metric families and the label names seen on their samples, from a Prometheus text exposition. */
function families(text: string): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) out.set(m[1], new Set());
  for (const m of text.matchAll(/^([a-zA-Z_:][\w:]*)(?:\{([^}]*)\})? \S+$/gm)) {
    const family = out.has(m[1]) ? m[1] : m[1].replace(/_(bucket|sum|count)$/, '');
    for (const l of (m[2] ?? '').matchAll(/(\w+)="/g)) out.get(family)?.add(l[1]);
  }
  return out;
}

/** Each `mailroom_…` selector of a query: the metric and the label names it matches on. */
function selectors(expr: string): { metric: string; labels: string[] }[] {
  return [...expr.matchAll(/\b(mailroom_[a-z0-9_]+)\b(\{([^}]*)\})?/g)].map((m) => ({
    metric: m[1],
    labels: [...(m[3] ?? '').matchAll(/(\w+)\s*(?:=~|!~|!=|=)/g)].map((l) => l[1]),
  }));
}

describe('every metric the rules, the dashboard and KEDA name is exported', () => {
  let api: TestApi;
  let worker: RunningWorker;
  beforeAll(async () => {
    const config = loadConfig(testEnv({ METRICS_TOKEN, REPUTATION_METRICS_TTL_MS: '0' }));
    api = await startTestApi(config);
    worker = await startWorker(config, { healthPort: 0 });
  });
  afterAll(async () => {
    await worker.stop();
    await api.close();
  });

  test('scraped from a running API and worker', async () => {
    // One email through both, so the send path's series have samples too.
    const p = await createTestProject(api.database);
    const res = await client(api.app, p).post('/v1/send', { to: recipient('mon'), from: `m@${p.domain}`, subject: 's', body: 'b' });
    expect(res.status).toBe(202);
    const workerUrl = `http://127.0.0.1:${worker.healthPort}/metrics`;
    const scrapeWorker = async () => (await fetch(workerUrl, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
    const workerText = await waitFor(async () => {
      const t = await scrapeWorker();
      return /^mailroom_emails_total\{outcome="sent"\} [1-9]/m.test(t) && t;
    }, 30_000, 'the email sent');
    const apiRes = await request(api.app).get('/metrics').set('Authorization', `Bearer ${METRICS_TOKEN}`);
    expect(apiRes.status).toBe(200);
    const exported = new Map([...families(apiRes.text), ...families(workerText)]);

    const named = [
      ...rules.map((r) => ({ where: `alert ${r.alert}`, expr: r.expr })),
      ...dashboardExprs.map((d) => ({ where: `dashboard panel "${d.panel}"`, expr: d.expr })),
      ...kedaExprs.map((expr) => ({ where: 'KEDA ScaledObject', expr })),
    ];
    const missing: string[] = [];
    const unknownLabels: string[] = [];
    for (const { where, expr } of named) {
      for (const { metric, labels } of selectors(expr)) {
        const family = exported.has(metric) ? metric : metric.replace(/_(bucket|sum|count)$/, '');
        const seen = exported.get(family);
        if (!seen) {
          missing.push(`${where}: ${metric}`);
          continue;
        }
        // Label names can be checked only on a family with samples.
        if (seen.size > 0) for (const l of labels.filter((x) => !seen.has(x))) unknownLabels.push(`${where}: ${metric}{${l}}`);
      }
    }
    expect(missing).toEqual([]);
    expect(unknownLabels).toEqual([]);
    expect(named.length).toBeGreaterThan(40);
  });
});
