/**
 * A DNS server on loopback (UDP, `dns2`) answering from a zone the test controls: A, AAAA, MX, TXT and CNAME
 * records by name; names not in the zone get NXDOMAIN; names marked `hang` never get an answer (a timeout).
 */
import dns2 from 'dns2';
import type { AddressInfo } from 'node:net';

/** Records of one name. */
export interface ZoneEntry {
  A?: string[];
  AAAA?: string[];
  MX?: { exchange: string; priority: number }[];
  TXT?: string[];
  CNAME?: string;
  /** Never answer queries for this name. */
  hang?: boolean;
}

export interface TestDnsServer {
  /** `127.0.0.1:port`, for `DNS_SERVERS`. */
  server: string;
  zone: Map<string, ZoneEntry>;
  /** Queries received, by `name TYPE`. */
  queries: string[];
  close(): Promise<void>;
}

const { Packet } = dns2;
/** dns2's type declarations lack RCODE (present at run time). */
const RCODE = (Packet as unknown as { RCODE: { NXDOMAIN: number } }).RCODE;

/** Starts a server. */
export async function startDnsServer(zone: Record<string, ZoneEntry> = {}): Promise<TestDnsServer> {
  const map = new Map(Object.entries(zone).map(([k, v]) => [k.toLowerCase(), v]));
  const queries: string[] = [];
  const reply = (
    request: InstanceType<typeof Packet>,
    send: (response: InstanceType<typeof Packet>) => Promise<Buffer>,
  ): Promise<Buffer> | undefined => {
    const response = Packet.createResponseFromRequest(request);
    const [q] = request.questions;
    if (!q) return send(response);
    const name = q.name.toLowerCase();
    const typeName = Object.entries(Packet.TYPE).find(([, v]) => v === q.type)?.[0] ?? String(q.type);
    queries.push(`${name} ${typeName}`);
    const entry = map.get(name);
    if (entry?.hang) return undefined;
    if (!entry) {
      response.header.rcode = RCODE.NXDOMAIN;
      return send(response);
    }
    const base = { name: q.name, class: Packet.CLASS.IN, ttl: 60 };
    // dns2 types answers as its Resource class; plain records are what it encodes.
    const answer = (r: object) => response.answers.push(r as unknown as (typeof response.answers)[number]);
    if (entry.CNAME && q.type !== Packet.TYPE.CNAME) {
      answer({ ...base, type: Packet.TYPE.CNAME, domain: entry.CNAME });
    }
    if (q.type === Packet.TYPE.A)
      for (const address of entry.A ?? []) answer({ ...base, type: Packet.TYPE.A, address });
    if (q.type === Packet.TYPE.AAAA)
      for (const address of entry.AAAA ?? []) answer({ ...base, type: Packet.TYPE.AAAA, address });
    if (q.type === Packet.TYPE.MX)
      for (const mx of entry.MX ?? [])
        answer({ ...base, type: Packet.TYPE.MX, exchange: mx.exchange, priority: mx.priority });
    if (q.type === Packet.TYPE.TXT)
      for (const data of entry.TXT ?? []) answer({ ...base, type: Packet.TYPE.TXT, data });
    if (q.type === Packet.TYPE.CNAME && entry.CNAME) answer({ ...base, type: Packet.TYPE.CNAME, domain: entry.CNAME });
    return send(response);
  };
  const server = dns2.createServer({
    udp: true,
    // dns2 does not await its handler: the reply goes out in the background, as it always did.
    handle: (request, send) => void reply(request, send),
  });
  await server.listen({ udp: { port: 0, address: '127.0.0.1' } });
  const port = (server.addresses().udp as AddressInfo).port;
  return {
    server: `127.0.0.1:${port}`,
    zone: map,
    queries,
    close: async () => {
      await server.close();
    },
  };
}
