/**
 * A recording proxy in front of the real SES v2 emulator (`aws-ses-v2-local`).
 *
 * The emulator keeps parsed messages with second-resolution times and drops custom headers of raw mail, so
 * tests route SES traffic through this proxy, which forwards every request unchanged and records each
 * `SendEmail` call: arrival time (ms), the raw MIME bytes, the message tags (`EmailTags`), and the emulator's answer. It runs in a process of
 * its own (`ses-recorder-main.ts`) so that the tests' own work cannot delay its timestamps. It can also answer with
 * a recorded SES error for matching requests (fault injection), to exercise throttling and rejections.
 *
 * A `SendBulkEmail` call is recorded as one send per entry (`bulk: true`), its `raw` the message SES would build:
 * the call's inline template with the entry's data inserted (`{{name}}`, unescaped, as SES does), its
 * `ReplacementHeaders`, composed by nodemailer. A fault matching an entry's message fails that entry alone, as SES
 * answers one entry (`BulkEmailEntryResult.Status`: {@link ENTRY_STATUS} of the fault's error type): the call goes
 * on to the emulator without it, and its result takes its place in the answer. A fault of `scope: 'call'` answers
 * the whole call instead, as SES answers a request it refuses (or fails) as a whole.
 *
 * Endpoints of its own: `POST /__recorded` `{ to?: string[], toPrefix?: string }` (the matching sends),
 * `POST /__faults` `{ match, status, body, times }`.
 */
import http from 'node:http';
import MailComposer from 'nodemailer/lib/mail-composer';

export interface RecordedSend {
  at: number;
  raw: string;
  from?: string;
  to: string[];
  status: number;
  messageId?: string;
  /** The `ConfigurationSetName` of the SendEmail request (absent when none was given). */
  configurationSet?: string;
  /** The request's `EmailTags` (SES message tags), as sent; a bulk entry's `ReplacementTags`. */
  tags: { Name: string; Value: string }[];
  /** Sent as an entry of a `SendBulkEmail` call (`raw` is then the message SES would build from it). */
  bulk?: boolean;
  /** A failed bulk entry's error (its `BulkEmailEntryResult.Error`). */
  error?: string;
}

/** The bulk entry status SES gives for what a fault's error type says of a one-message send. */
const ENTRY_STATUS: Record<string, string> = {
  MessageRejected: 'MESSAGE_REJECTED',
  MailFromDomainNotVerifiedException: 'MAIL_FROM_DOMAIN_NOT_VERIFIED',
  TooManyRequestsException: 'ACCOUNT_THROTTLED',
  Throttling: 'ACCOUNT_THROTTLED',
  ThrottlingException: 'ACCOUNT_THROTTLED',
  LimitExceededException: 'ACCOUNT_DAILY_QUOTA_EXCEEDED',
  SendingPausedException: 'ACCOUNT_SENDING_PAUSED',
  AccountSuspendedException: 'ACCOUNT_SUSPENDED',
  BadRequestException: 'INVALID_PARAMETER_VALUE',
};

/** The entry result a fault stands for (a 5xx, or an error type without an entry status: a transient failure). */
function faultEntryResult(fault: Fault): { Status: string; Error: string } {
  const type = (fault.headers['x-amzn-errortype'] ?? '').split(':')[0];
  return { Status: ENTRY_STATUS[type] ?? 'TRANSIENT_FAILURE', Error: `${type || fault.status}: ${fault.body}` };
}

/** What the recorder reads of a `SendBulkEmail` request. */
interface BulkRequest {
  FromEmailAddress?: string;
  ReplyToAddresses?: string[];
  ConfigurationSetName?: string;
  DefaultContent?: { Template?: { TemplateContent?: { Subject?: string; Html?: string; Text?: string } } };
  BulkEmailEntries?: {
    Destination?: { ToAddresses?: string[] };
    ReplacementEmailContent?: { ReplacementTemplate?: { ReplacementTemplateData?: string } };
    ReplacementHeaders?: { Name: string; Value: string }[];
    ReplacementTags?: { Name: string; Value: string }[];
  }[];
}

/** The messages of a bulk call's entries, as SES would build them (see the module notes). */
async function bulkRecords(parsed: BulkRequest, at: number): Promise<RecordedSend[]> {
  const template = parsed.DefaultContent?.Template?.TemplateContent ?? {};
  const fill = (source: string | undefined, data: Record<string, unknown>) =>
    (source ?? '').replace(/\{\{\s*(\w+)\s*\}\}/g, (_, name: string) => {
      const value = data[name];
      if (value === undefined || value === null) return '';
      return typeof value === 'string' ? value : JSON.stringify(value);
    });
  return Promise.all(
    (parsed.BulkEmailEntries ?? []).map(async (e) => {
      const data = JSON.parse(
        e.ReplacementEmailContent?.ReplacementTemplate?.ReplacementTemplateData ?? '{}',
      ) as Record<string, unknown>;
      const to = e.Destination?.ToAddresses ?? [];
      const raw = await new MailComposer({
        from: parsed.FromEmailAddress,
        to,
        replyTo: parsed.ReplyToAddresses,
        subject: fill(template.Subject, data),
        html: fill(template.Html, data),
        text: fill(template.Text, data),
        headers: (e.ReplacementHeaders ?? []).map((h) => ({ key: h.Name, value: h.Value })),
      })
        .compile()
        .build();
      return {
        at,
        raw: raw.toString('utf8'),
        from: parsed.FromEmailAddress,
        to,
        status: 0,
        tags: e.ReplacementTags ?? [],
        bulk: true,
        ...(parsed.ConfigurationSetName ? { configurationSet: parsed.ConfigurationSetName } : {}),
      };
    }),
  );
}

interface Fault {
  match: string;
  /** For a bulk call: `entry` (default) fails the matching entry alone; `call` answers the whole request. */
  scope: 'entry' | 'call';
  status: number;
  headers: Record<string, string>;
  body: string;
  times: number;
}

/** Starts the proxy on a free loopback port. */
export async function startSesRecorder(upstream: string): Promise<{ url: string; close: () => Promise<void> }> {
  const sends: RecordedSend[] = [];
  const faults: Fault[] = [];
  const target = new URL(upstream);

  const server = http.createServer((req, res) => {
    // Arrival = when the request's headers arrived, at sub-millisecond resolution.
    const at = performance.timeOrigin + performance.now();
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => void handle(Buffer.concat(chunks)));
    const handle = async (body: Buffer) => {
      if (req.url === '/__recorded' && req.method === 'POST') {
        // Filtered here, so that callers polling for their own messages never make this process serialise
        // everything it holds (that blocked its event loop and skewed arrival times).
        const q = JSON.parse(body.toString() || '{}') as { to?: string[]; toPrefix?: string };
        const wanted = new Set((q.to ?? []).map((a) => a.toLowerCase()));
        const match = (s: RecordedSend) =>
          s.to.some(
            (t) => wanted.has(t.toLowerCase()) || (q.toPrefix !== undefined && t.toLowerCase().startsWith(q.toPrefix)),
          );
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(sends.filter(match)));
        return;
      }
      if (req.url === '/__faults' && req.method === 'POST') {
        const f = JSON.parse(body.toString()) as Partial<Fault>;
        faults.push({
          match: f.match!,
          status: f.status ?? 400,
          headers: f.headers ?? {},
          body: f.body ?? '',
          times: f.times ?? 1,
          scope: f.scope ?? 'entry',
        });
        res.writeHead(204).end();
        return;
      }
      const isSend = req.method === 'POST' && req.url === '/v2/email/outbound-emails';
      let record: RecordedSend | undefined;
      if (isSend) {
        const parsed = JSON.parse(body.toString()) as {
          FromEmailAddress?: string;
          Destination?: { ToAddresses?: string[] };
          Content?: { Raw?: { Data?: string } };
          ConfigurationSetName?: string;
          EmailTags?: { Name: string; Value: string }[];
        };
        const raw = Buffer.from(parsed.Content?.Raw?.Data ?? '', 'base64').toString('utf8');
        record = {
          at,
          raw,
          from: parsed.FromEmailAddress,
          to: parsed.Destination?.ToAddresses ?? [],
          status: 0,
          tags: parsed.EmailTags ?? [],
          ...(parsed.ConfigurationSetName ? { configurationSet: parsed.ConfigurationSetName } : {}),
        };
        const fault = faults.find((f) => f.times > 0 && raw.includes(f.match));
        if (fault) {
          fault.times--;
          record.status = fault.status;
          sends.push(record);
          res.writeHead(fault.status, { 'content-type': 'application/json', ...fault.headers }).end(fault.body);
          return;
        }
      }
      const isBulk = req.method === 'POST' && req.url === '/v2/email/outbound-bulk-emails';
      let entries: RecordedSend[] | undefined;
      /** Per entry of a bulk call, the result of the fault that failed it (those are not forwarded). */
      let faulted: ({ Status: string; Error: string } | undefined)[] = [];
      let forward = body;
      if (isBulk) {
        const parsed = JSON.parse(body.toString()) as BulkRequest;
        entries = await bulkRecords(parsed, at);
        const whole = faults.find(
          (f) => f.times > 0 && f.scope === 'call' && entries!.some((e) => e.raw.includes(f.match)),
        );
        if (whole) {
          whole.times--;
          for (const e of entries) sends.push({ ...e, status: whole.status });
          res.writeHead(whole.status, { 'content-type': 'application/json', ...whole.headers }).end(whole.body);
          return;
        }
        faulted = entries.map((e) => {
          const fault = faults.find((f) => f.times > 0 && f.scope === 'entry' && e.raw.includes(f.match));
          if (!fault) return undefined;
          fault.times--;
          return faultEntryResult(fault);
        });
        if (faulted.some(Boolean)) {
          parsed.BulkEmailEntries = parsed.BulkEmailEntries?.filter((_, i) => !faulted[i]);
          forward = Buffer.from(JSON.stringify(parsed));
          if (parsed.BulkEmailEntries?.length === 0) {
            entries.forEach((e, i) => sends.push({ ...e, status: 400, error: faulted[i]!.Error }));
            res
              .writeHead(200, { 'content-type': 'application/json' })
              .end(JSON.stringify({ BulkEmailEntryResults: faulted.map((f) => ({ ...f, MessageId: undefined })) }));
            return;
          }
        }
      }
      const upstreamReq = http.request(
        {
          host: target.hostname,
          port: target.port,
          path: req.url,
          method: req.method,
          headers: { ...req.headers, 'content-length': String(forward.length) },
        },
        (up) => {
          const out: Buffer[] = [];
          up.on('data', (c: Buffer) => out.push(c));
          up.on('end', () => {
            const payload = Buffer.concat(out);
            if (record) {
              record.status = up.statusCode ?? 0;
              try {
                record.messageId = (JSON.parse(payload.toString()) as { MessageId?: string }).MessageId;
              } catch {
                /* not JSON */
              }
              sends.push(record);
            }
            if (entries) {
              let results: { MessageId?: string; Status?: string; Error?: string }[] = [];
              try {
                results =
                  (JSON.parse(payload.toString()) as { BulkEmailEntryResults?: typeof results })
                    .BulkEmailEntryResults ?? [];
              } catch {
                /* not JSON */
              }
              // The forwarded entries' results, with the faulted entries' in their places.
              const merged: typeof results = faulted.some(Boolean)
                ? faulted.map((f) => f ?? results.shift() ?? {})
                : results;
              entries.forEach((e, i) => {
                const r = merged[i] ?? {};
                const ok = up.statusCode === 200 && r.Status === 'SUCCESS';
                const status = ok ? 200 : up.statusCode === 200 ? 400 : (up.statusCode ?? 0);
                sends.push({ ...e, status, messageId: r.MessageId, ...(r.Error ? { error: r.Error } : {}) });
              });
              if (faulted.some(Boolean) && up.statusCode === 200) {
                const answer = JSON.stringify({ BulkEmailEntryResults: merged });
                res.writeHead(200, { 'content-type': 'application/json' }).end(answer);
                return;
              }
            }
            res.writeHead(up.statusCode ?? 502, up.headers).end(payload);
          });
        },
      );
      upstreamReq.on('error', () => res.writeHead(502).end());
      upstreamReq.end(forward);
    };
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

if (require.main === module) {
  // Child-process entry: `ses-recorder.ts <upstream url>`; prints the proxy's URL on stdout.
  void startSesRecorder(process.argv[2]).then(({ url }) => process.stdout.write(`${url}\n`));
}
