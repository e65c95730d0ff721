/**
 * A recording proxy in front of the real SES v2 emulator (`aws-ses-v2-local`).
 *
 * The emulator keeps parsed messages with second-resolution times and drops custom headers of raw mail, so
 * tests route SES traffic through this proxy, which forwards every request unchanged and records each
 * `SendEmail` call: arrival time (ms), the raw MIME bytes, the message tags (`EmailTags`), and the emulator's answer. It runs in a process of
 * its own (`ses-recorder-main.ts`) so that the tests' own work cannot delay its timestamps. It can also answer with
 * a recorded SES error for matching requests (fault injection), to exercise throttling and rejections.
 *
 * Endpoints of its own: `POST /__recorded` `{ to?: string[], toPrefix?: string }` (the matching sends),
 * `POST /__faults` `{ match, status, body, times }`.
 */
import http from 'node:http';

export interface RecordedSend {
  at: number;
  raw: string;
  from?: string;
  to: string[];
  status: number;
  messageId?: string;
  /** The `ConfigurationSetName` of the SendEmail request (absent when none was given). */
  configurationSet?: string;
  /** The request's `EmailTags` (SES message tags), as sent. */
  tags: { Name: string; Value: string }[];
}

interface Fault {
  match: string;
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
    req.on('end', () => {
      const body = Buffer.concat(chunks);
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
      const upstreamReq = http.request(
        { host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers },
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
            res.writeHead(up.statusCode ?? 502, up.headers).end(payload);
          });
        },
      );
      upstreamReq.on('error', () => res.writeHead(502).end());
      upstreamReq.end(body);
    });
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
