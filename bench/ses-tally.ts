/**
 * A counting proxy in front of the SES v2 emulator for `npm run bench -- campaign-delivery`: it forwards every
 * request unchanged (as the tests' recording proxy, test/support/ses-recorder.ts, does) and keeps, per `SendEmail`
 * the emulator accepted (and per `SendBulkEmail` entry it accepted: one message each), only its arrival time and its
 * recipients. The recording proxy keeps each message's raw MIME
 * and answers with all of it, which at 100,000 messages is hundreds of MB held and serialised; this keeps a number
 * and a map entry per message.
 *
 * Runs in a process of its own (`ses-tally.ts <upstream url> <port>`, so the bench's own work cannot delay its
 * timestamps) and answers `POST /__tally` `{ toPrefix }` with {@link Tally} for the recipients starting with the
 * prefix.
 *
 * @module
 */
import http from 'node:http';

/** The sends to the recipients of one prefix, as counted at the proxy. */
export interface Tally {
  /** `SendEmail` calls the emulator answered with 200. */
  sends: number;
  /** Distinct recipients among them (a recipient counted once however many messages it got). */
  recipients: number;
  /** Recipients that got more than one message, and up to 5 of them. */
  duplicates: number;
  duplicateSample: string[];
  /** `SendEmail` calls answered with anything but 200. */
  failed: number;
  /** Arrival (ms since the epoch, sub-ms resolution: `performance.timeOrigin + performance.now()`) of the first and last send. */
  first: number;
  last: number;
  /** The most sends that arrived within any one second (a sliding window over the arrival times). */
  busiestSecond: number;
  /** Sends in each tenth of the time from the first to the last: where a drain fell behind the rate. */
  tenths: number[];
}

interface Recipient {
  /** Arrival times of the messages it got. */
  at: number[];
}

/** Starts the proxy on `port` (loopback). */
export async function startSesTally(upstream: string, port: number): Promise<http.Server> {
  const byRecipient = new Map<string, Recipient>();
  const failed: string[] = [];
  const target = new URL(upstream);

  const tally = (prefix: string): Tally => {
    const times: number[] = [];
    let recipients = 0;
    const dups: string[] = [];
    for (const [to, r] of byRecipient) {
      if (!to.startsWith(prefix)) continue;
      recipients++;
      times.push(...r.at);
      if (r.at.length > 1) dups.push(to);
    }
    times.sort((a, b) => a - b);
    let busiest = 0;
    for (let i = 0, j = 0; i < times.length; i++) {
      while (times[i] - times[j] >= 1000) j++;
      busiest = Math.max(busiest, i - j + 1);
    }
    return {
      sends: times.length,
      recipients,
      duplicates: dups.length,
      duplicateSample: dups.slice(0, 5),
      failed: failed.filter((to) => to.startsWith(prefix)).length,
      first: times[0] ?? NaN,
      last: times[times.length - 1] ?? NaN,
      busiestSecond: busiest,
      tenths: Array.from({ length: 10 }, (_, k) => {
        const span = times[times.length - 1] - times[0];
        return times.filter((t) => Math.min(9, Math.floor(((t - times[0]) / span) * 10)) === k).length;
      }),
    };
  };

  const server = http.createServer((req, res) => {
    const at = performance.timeOrigin + performance.now();
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      if (req.url === '/__tally' && req.method === 'POST') {
        const q = JSON.parse(body.toString() || '{}') as { toPrefix?: string };
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(tally(q.toPrefix ?? '')));
        return;
      }
      const isSend = req.method === 'POST' && req.url === '/v2/email/outbound-emails';
      const isBulk = req.method === 'POST' && req.url === '/v2/email/outbound-bulk-emails';
      type Destination = { Destination?: { ToAddresses?: string[] } };
      /** The recipients of each message of the request: one for `SendEmail`, one per entry for `SendBulkEmail`. */
      const messages: string[][] = isSend
        ? [(JSON.parse(body.toString()) as Destination).Destination?.ToAddresses ?? []]
        : isBulk
          ? ((JSON.parse(body.toString()) as { BulkEmailEntries?: Destination[] }).BulkEmailEntries ?? []).map(
              (e) => e.Destination?.ToAddresses ?? [],
            )
          : [];
      const upstreamReq = http.request(
        { host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers },
        (up) => {
          const out: Buffer[] = [];
          up.on('data', (c: Buffer) => out.push(c));
          up.on('end', () => {
            let results: { Status?: string }[] | undefined;
            if (isBulk && up.statusCode === 200)
              try {
                results = (
                  JSON.parse(Buffer.concat(out).toString()) as { BulkEmailEntryResults?: { Status?: string }[] }
                ).BulkEmailEntryResults;
              } catch {
                results = []; // not JSON: no entry counted as sent
              }
            for (const [i, to] of messages.entries())
              for (const address of to) {
                const key = address.toLowerCase();
                if (up.statusCode !== 200 || (results && results[i]?.Status !== 'SUCCESS')) failed.push(key);
                else {
                  const r = byRecipient.get(key);
                  if (r) r.at.push(at);
                  else byRecipient.set(key, { at: [at] });
                }
              }
            res.writeHead(up.statusCode ?? 502, up.headers).end(Buffer.concat(out));
          });
        },
      );
      upstreamReq.on('error', () => res.writeHead(502).end());
      upstreamReq.end(body);
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return server;
}

if (require.main === module) {
  // Child-process entry: `ses-tally.ts <upstream url> <port>`; prints `ready` on stdout once listening.
  void startSesTally(process.argv[2], Number(process.argv[3])).then(() => process.stdout.write('ready\n'));
}
