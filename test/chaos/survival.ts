/**
 * What the chaos tests count: for a set of accepted emails, how many reached SES, how many never did and how
 * many more than once, read from the SES recorder (Message-ID local part = email id), and the final statuses
 * in Postgres.
 */
import net from 'node:net';
import { inArray } from 'drizzle-orm';
import { emails } from '@mailroom/db/schema/emails';
import { type Database } from '@mailroom/db/client';
import { parseMail, sesSendsTo } from '../support/harness';

/** Email id → SES copies accepted (status 200) for the given recipients. */
export async function sesCopies(addresses: string[]): Promise<Map<string, number>> {
  const sends = await sesSendsTo(addresses);
  const mails = await Promise.all(sends.map(parseMail));
  const counts = new Map<string, number>();
  for (const m of mails) {
    const id = m.messageId!.replace(/^<|@.*$/g, '');
    counts.set(id, (counts.get(id) ?? 0) + 1);
  }
  return counts;
}

/** Delivered, lost and duplicated among `ids` (accepted email ids), per the SES record. */
export async function survival(
  addresses: string[],
  ids: string[],
): Promise<{ delivered: number; lost: string[]; duplicated: string[]; copies: Map<string, number> }> {
  const copies = await sesCopies(addresses);
  const lost = ids.filter((id) => !copies.has(id));
  const duplicated = ids.filter((id) => (copies.get(id) ?? 0) > 1);
  return { delivered: ids.length - lost.length, lost, duplicated, copies };
}

/** Status → count of the given emails' rows. */
export async function statusCounts(database: Database, ids: string[]): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (let i = 0; i < ids.length; i += 500) {
    const rows = await database.db
      .select({ status: emails.status })
      .from(emails)
      .where(inArray(emails.id, ids.slice(i, i + 500)));
    for (const r of rows) out[r.status] = (out[r.status] ?? 0) + 1;
  }
  return out;
}

/** Answers whether a Redis server answers PING on loopback `port` (within 1 s). */
export function redisPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.on('error', () => done(false));
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (d) => done(d.toString().startsWith('+PONG')));
  });
}
