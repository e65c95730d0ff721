/**
 * Sending-domain identities: the DNS records a domain publishes, and the provider that registers and checks them.
 *
 * - {@link SesIdentityProvider}: Amazon SES v2 email identities (`CreateEmailIdentity` with Easy DKIM,
 *   `PutEmailIdentityMailFromAttributes`, `GetEmailIdentity`, `DeleteEmailIdentity`).
 * - {@link LocalIdentityProvider}: for the SES emulator, which has no identities: it issues DKIM tokens itself and
 *   verifies by resolving the published records through the configured DNS servers, so the whole flow runs on a
 *   laptop and in tests.
 *
 * Records (SES's documented setup): three DKIM CNAMEs `<token>._domainkey.<domain>` → `<token>.dkim.amazonses.com`;
 * for the custom MAIL FROM domain an MX → `feedback-smtp.<region>.amazonses.com` (priority 10) and an SPF TXT
 * `v=spf1 include:amazonses.com ~all`; a DMARC TXT at `_dmarc.<domain>` is suggested (not required). A domain is
 * verified when its DKIM records are (as SES decides); MAIL FROM records are reported per record.
 *
 * @module
 */
import type { DomainRecord } from '@mailroom/db/schema/domain-record';
import { randomBytes } from 'node:crypto';
import type { Resolver } from 'node:dns/promises';
import {
  CreateEmailIdentityCommand,
  DeleteEmailIdentityCommand,
  GetEmailIdentityCommand,
  PutEmailIdentityMailFromAttributesCommand,
  type SESv2Client,
} from '@aws-sdk/client-sesv2';
import type { MailConfig } from './config';
import { createSesClient } from './ses-client';

/** One DNS record to publish and its state at the last check. */

/** The records to publish for `domain` (all `pending`). */
export function domainRecords(
  domain: string,
  mailFromDomain: string,
  dkimTokens: readonly string[],
  region: string,
): DomainRecord[] {
  return [
    ...dkimTokens.map((t) => ({
      purpose: 'dkim' as const,
      type: 'CNAME' as const,
      name: `${t}._domainkey.${domain}`,
      value: `${t}.dkim.amazonses.com`,
      required: true,
      status: 'pending' as const,
    })),
    {
      purpose: 'mail-from-mx',
      type: 'MX',
      name: mailFromDomain,
      value: `feedback-smtp.${region}.amazonses.com`,
      priority: 10,
      required: true,
      status: 'pending',
    },
    {
      purpose: 'mail-from-spf',
      type: 'TXT',
      name: mailFromDomain,
      value: 'v=spf1 include:amazonses.com ~all',
      required: true,
      status: 'pending',
    },
    {
      purpose: 'dmarc',
      type: 'TXT',
      name: `_dmarc.${domain}`,
      value: `v=DMARC1; p=none; rua=mailto:dmarc-reports@${domain}`,
      required: false,
      status: 'pending',
    },
  ];
}

/** What the provider says of an identity now. */
export interface IdentityCheck {
  status: 'pending' | 'verified' | 'failed';
  /** The records with their found/failed state. */
  records: DomainRecord[];
  reason?: string;
}

/** Registers, checks and removes sending-domain identities. */
export interface DomainIdentityProvider {
  /**
   * Registers `domain` with Easy DKIM and its custom MAIL FROM domain; registering one that exists returns its
   * tokens. @returns the three DKIM tokens.
   */
  create(domain: string, mailFromDomain: string): Promise<{ dkimTokens: string[] }>;
  /** The identity's state, given the records it should have. */
  check(domain: string, records: readonly DomainRecord[]): Promise<IdentityCheck>;
  /** Removes the identity (a missing one is fine). */
  delete(domain: string): Promise<void>;
}

const errName = (err: unknown) => (err as { name?: string }).name;

/** Amazon SES v2 identities. */
export class SesIdentityProvider implements DomainIdentityProvider {
  private readonly client: SESv2Client;

  constructor(config: Pick<MailConfig, 'sesRegion' | 'sesEndpoint' | 'awsCredentials'>, client?: SESv2Client) {
    this.client = client ?? createSesClient(config);
  }

  async create(domain: string, mailFromDomain: string): Promise<{ dkimTokens: string[] }> {
    let tokens: string[] | undefined;
    try {
      const created = await this.client.send(new CreateEmailIdentityCommand({ EmailIdentity: domain }));
      tokens = created.DkimAttributes?.Tokens;
    } catch (err) {
      if (errName(err) !== 'AlreadyExistsException') throw err;
      const existing = await this.client.send(new GetEmailIdentityCommand({ EmailIdentity: domain }));
      tokens = existing.DkimAttributes?.Tokens;
    }
    await this.client.send(
      new PutEmailIdentityMailFromAttributesCommand({
        EmailIdentity: domain,
        MailFromDomain: mailFromDomain,
        BehaviorOnMxFailure: 'USE_DEFAULT_VALUE',
      }),
    );
    return { dkimTokens: tokens ?? [] };
  }

  async check(domain: string, records: readonly DomainRecord[]): Promise<IdentityCheck> {
    const got = await this.client.send(new GetEmailIdentityCommand({ EmailIdentity: domain }));
    const dkim = got.DkimAttributes?.Status;
    const mailFrom = got.MailFromAttributes?.MailFromDomainStatus;
    const state = (s: string | undefined): DomainRecord['status'] =>
      s === 'SUCCESS' ? 'found' : s === 'FAILED' ? 'failed' : 'pending';
    const updated = records.map((r) => ({
      ...r,
      // DMARC is a suggestion and the tracking CNAME is checked through DNS (`domain-tracking.ts`): SES says nothing of them.
      status:
        r.purpose === 'dkim'
          ? state(dkim)
          : r.purpose === 'dmarc' || r.purpose === 'tracking'
            ? r.status
            : state(mailFrom),
    }));
    if (got.VerifiedForSendingStatus) return { status: 'verified', records: updated };
    if (dkim === 'FAILED')
      return { status: 'failed', records: updated, reason: 'SES could not find the DKIM records within 72 hours' };
    return { status: 'pending', records: updated };
  }

  async delete(domain: string): Promise<void> {
    try {
      await this.client.send(new DeleteEmailIdentityCommand({ EmailIdentity: domain }));
    } catch (err) {
      if (errName(err) !== 'NotFoundException') throw err;
    }
  }
}

/** Looks one record up: does DNS hold it now? */
async function recordFound(resolver: Resolver, r: DomainRecord): Promise<boolean> {
  const norm = (s: string) => s.toLowerCase().replace(/\.$/, '');
  try {
    if (r.type === 'CNAME') return (await resolver.resolveCname(r.name)).some((v) => norm(v) === norm(r.value));
    if (r.type === 'MX') return (await resolver.resolveMx(r.name)).some((m) => norm(m.exchange) === norm(r.value));
    const txt = (await resolver.resolveTxt(r.name)).map((chunks) => chunks.join(''));
    return r.purpose === 'dmarc' ? txt.some((t) => t.startsWith('v=DMARC1')) : txt.some((t) => t.trim() === r.value);
  } catch {
    return false;
  }
}

/**
 * Identities checked by this service through DNS (`DNS_SERVERS`), for the SES emulator. A domain is verified when
 * all its DKIM CNAMEs resolve as published; it never fails (SES gives up after 72 hours; the local check keeps
 * looking).
 */
export class LocalIdentityProvider implements DomainIdentityProvider {
  constructor(private readonly resolver: Resolver) {}

  create(): Promise<{ dkimTokens: string[] }> {
    // SES tokens are 32 lower-case base32 characters.
    const token = () => Array.from(randomBytes(32), (b) => 'abcdefghijklmnopqrstuvwxyz234567'[b % 32]).join('');
    return Promise.resolve({ dkimTokens: [token(), token(), token()] });
  }

  async check(_domain: string, records: readonly DomainRecord[]): Promise<IdentityCheck> {
    // The tracking CNAME is checked by `domain-tracking.ts` (with its configuration sets), not here.
    const updated = await Promise.all(
      records.map(async (r) =>
        r.purpose === 'tracking'
          ? r
          : { ...r, status: (await recordFound(this.resolver, r)) ? ('found' as const) : ('pending' as const) },
      ),
    );
    const dkim = updated.filter((r) => r.purpose === 'dkim');
    return {
      status: dkim.length > 0 && dkim.every((r) => r.status === 'found') ? 'verified' : 'pending',
      records: updated,
    };
  }

  async delete(): Promise<void> {
    // Nothing registered anywhere.
  }
}

/**
 * Why a provider call failed: SES `rejected` the request itself (a 400 such as `BadRequestException`: the caller
 * can fix it), or the provider is `unavailable` (throttled, a 5xx, unreachable, or refusing our credentials: the
 * operator's or AWS's problem, worth retrying later).
 */
export function identityFailure(err: unknown): { kind: 'rejected' | 'unavailable'; message: string } {
  const e = err as { name?: string; message?: string; $metadata?: { httpStatusCode?: number } };
  const message = `${e.name ?? 'Error'}: ${e.message ?? 'unknown error'}`.slice(0, 500);
  const status = e.$metadata?.httpStatusCode;
  const rejected = status === 400 && !/Throttl|TooManyRequests|LimitExceeded/.test(e.name ?? '');
  return { kind: rejected ? 'rejected' : 'unavailable', message };
}

/** The provider `DOMAIN_IDENTITY_PROVIDER` selects. */
export function createIdentityProvider(
  config: Pick<MailConfig, 'domainIdentityProvider' | 'sesRegion' | 'sesEndpoint' | 'awsCredentials'>,
  resolver: Resolver,
): DomainIdentityProvider {
  return config.domainIdentityProvider === 'ses'
    ? new SesIdentityProvider(config)
    : new LocalIdentityProvider(resolver);
}
