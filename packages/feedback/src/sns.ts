/**
 * Amazon SNS HTTP(S) endpoint messages: parsing, and signature verification as Amazon documents it
 * ("Verifying the signatures of Amazon SNS messages",
 * https://docs.aws.amazon.com/sns/latest/dg/sns-verify-signature-of-message.html).
 *
 * - The string to sign is the message's fields, in a fixed order, each as `Name\nvalue\n`.
 * - `SignatureVersion` 1 signs it with SHA1withRSA, version 2 with SHA256withRSA.
 * - The key comes from the X.509 certificate at `SigningCertURL`, which must be an https URL on a trusted SNS
 *   host (configurable: `SNS_CERT_HOSTS`) ending in `.pem`. Certificates are cached per URL.
 *
 * @module
 */
import { createVerify, X509Certificate } from 'node:crypto';
import { Type, type Static } from '@sinclair/typebox';
import { dataValidator } from '@mailroom/platform/validation';

const Str = Type.String({ maxLength: 300_000 });

/** The JSON body SNS POSTs (all three message types; type-specific fields optional). */
export const SnsMessage = Type.Object({
  Type: Type.Union([
    Type.Literal('Notification'),
    Type.Literal('SubscriptionConfirmation'),
    Type.Literal('UnsubscribeConfirmation'),
  ]),
  MessageId: Type.String({ minLength: 1, maxLength: 200 }),
  TopicArn: Type.String({ minLength: 1, maxLength: 400 }),
  Message: Str,
  Timestamp: Type.String({ minLength: 1, maxLength: 100 }),
  SignatureVersion: Type.Union([Type.Literal('1'), Type.Literal('2')]),
  Signature: Type.String({ minLength: 1, maxLength: 4096 }),
  SigningCertURL: Type.String({ minLength: 1, maxLength: 2048 }),
  Subject: Type.Optional(Type.String({ maxLength: 1000 })),
  Token: Type.Optional(Type.String({ maxLength: 4096 })),
  SubscribeURL: Type.Optional(Type.String({ maxLength: 4096 })),
  UnsubscribeURL: Type.Optional(Type.String({ maxLength: 4096 })),
});
export type SnsMessage = Static<typeof SnsMessage>;

/** The fields that authenticate a message: without them (or with them malformed) it is unsigned. */
const SIGNATURE_FIELDS = ['SignatureVersion', 'Signature', 'SigningCertURL'] as const;
const validateSnsContent = dataValidator(Type.Omit(SnsMessage, [...SIGNATURE_FIELDS]));
const validateSnsSignature = dataValidator(Type.Pick(SnsMessage, [...SIGNATURE_FIELDS]));

/**
 * SNS message ids are remembered this long (days) to recognise redeliveries; an older message is refused
 * outright, so a captured message cannot be replayed once its id is forgotten. SNS stops retrying long before.
 */
export const SNS_MESSAGE_RETENTION_DAYS = 30;

/** Why a message was refused; `status` is the HTTP answer (SNS retries 5xx, not 4xx). */
export class SnsRejection extends Error {
  constructor(
    readonly status: 400 | 403 | 503,
    message: string,
  ) {
    super(message);
    this.name = 'SnsRejection';
  }
}

/**
 * Parses a request body into an SNS message. A body that is malformed is a bad request; one that is well formed
 * but carries no usable signature cannot be authenticated, which is an authentication failure like a signature
 * that does not verify.
 *
 * @throws {@link SnsRejection} 400 when it is not JSON of the SNS shape (signature fields aside);
 *   403 when `SignatureVersion` (`1` or `2`), `Signature` or `SigningCertURL` is missing or malformed.
 */
export function parseSnsMessage(body: string): SnsMessage {
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch {
    throw new SnsRejection(400, 'body is not JSON');
  }
  const describe = (errors: { field: string; message: string }[]) =>
    errors.map((e) => `${e.field} ${e.message}`).join('; ');
  const content = validateSnsContent(json);
  if (!content.ok) throw new SnsRejection(400, `not an SNS message: ${describe(content.errors)}`);
  const m = content.value;
  if (m.Type !== 'Notification' && (m.Token === undefined || m.SubscribeURL === undefined)) {
    throw new SnsRejection(400, `${m.Type} without Token or SubscribeURL`);
  }
  const signature = validateSnsSignature(json);
  if (!signature.ok) throw new SnsRejection(403, `unsigned SNS message: ${describe(signature.errors)}`);
  return json as SnsMessage;
}

/** The canonical string SNS signs for a message (field order per message type, fixed by Amazon). */
export function snsStringToSign(m: SnsMessage): string {
  const fields: (keyof SnsMessage)[] =
    m.Type === 'Notification'
      ? ['Message', 'MessageId', 'Subject', 'Timestamp', 'TopicArn', 'Type']
      : ['Message', 'MessageId', 'SubscribeURL', 'Timestamp', 'Token', 'TopicArn', 'Type'];
  let out = '';
  for (const f of fields) {
    const v = m[f];
    if (v === undefined) continue;
    out += `${f}\n${v}\n`;
  }
  return out;
}

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);

/**
 * Whether `raw` is a URL SNS could have given: https on a host matching one of `hostPatterns` (`*` = one DNS
 * label), or plain http on a loopback host listed literally (a test's own certificate server).
 */
export function isTrustedSnsUrl(raw: string, hostPatterns: readonly string[]): boolean {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return false;
  }
  if (u.username || u.password) return false;
  const host = u.host.toLowerCase();
  const matches = hostPatterns.some((p) => {
    const re = new RegExp(
      `^${p
        .toLowerCase()
        .split('*')
        .map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
        .join('[a-z0-9-]+')}$`,
    );
    return re.test(host);
  });
  if (!matches) return false;
  if (u.protocol === 'https:') return true;
  return (
    u.protocol === 'http:' &&
    LOOPBACK.has(u.hostname.toLowerCase()) &&
    hostPatterns.some((p) => p.toLowerCase() === host)
  );
}

/** Fetches a certificate's PEM text (injectable for tests of the verifier alone). */
export type CertificateFetcher = (url: string) => Promise<string>;

/** Fetches with a 5 s timeout, refusing redirects and answers over 64 KiB. */
export const fetchCertificate: CertificateFetcher = async (url) => {
  const res = await fetch(url, { redirect: 'error', signal: AbortSignal.timeout(5_000) });
  if (!res.ok) throw new Error(`certificate fetch answered ${res.status}`);
  const text = await res.text();
  if (text.length > 65_536) throw new Error('certificate too large');
  return text;
};

/**
 * Verifies SNS message signatures. Certificates are cached per URL (at most 100; SNS uses a handful), and a
 * failed fetch is not cached.
 */
export class SnsVerifier {
  private readonly certs = new Map<string, Promise<X509Certificate>>();

  constructor(
    private readonly hostPatterns: readonly string[],
    private readonly fetcher: CertificateFetcher = fetchCertificate,
  ) {}

  /**
   * Checks the message's age, the certificate URL, then the signature.
   *
   * @throws {@link SnsRejection} 403 for a message older than {@link SNS_MESSAGE_RETENTION_DAYS}, an untrusted
   *   certificate URL, an expired certificate or a bad signature;
   *   503 when the certificate cannot be fetched (SNS retries the message).
   */
  async verify(m: SnsMessage): Promise<void> {
    const sentAt = Date.parse(m.Timestamp);
    if (Number.isNaN(sentAt) || sentAt < Date.now() - SNS_MESSAGE_RETENTION_DAYS * 86_400_000) {
      throw new SnsRejection(
        403,
        `message is older than ${SNS_MESSAGE_RETENTION_DAYS} days (or has no valid Timestamp)`,
      );
    }
    if (!isTrustedSnsUrl(m.SigningCertURL, this.hostPatterns) || !new URL(m.SigningCertURL).pathname.endsWith('.pem')) {
      throw new SnsRejection(403, 'SigningCertURL is not on a trusted SNS host');
    }
    const cert = await this.certificate(m.SigningCertURL);
    const now = Date.now();
    if (now < Date.parse(cert.validFrom) || now > Date.parse(cert.validTo))
      throw new SnsRejection(403, 'signing certificate is not valid now');
    const verifier = createVerify(m.SignatureVersion === '1' ? 'RSA-SHA1' : 'RSA-SHA256');
    verifier.update(snsStringToSign(m), 'utf8');
    let ok = false;
    try {
      ok = verifier.verify(cert.publicKey, m.Signature, 'base64');
    } catch {
      ok = false;
    }
    if (!ok) throw new SnsRejection(403, 'signature does not verify');
  }

  private certificate(url: string): Promise<X509Certificate> {
    let pending = this.certs.get(url);
    if (!pending) {
      pending = this.fetcher(url).then(
        (pem) => {
          try {
            return new X509Certificate(pem);
          } catch {
            throw new SnsRejection(403, 'SigningCertURL does not hold an X.509 certificate');
          }
        },
        (err: Error) => {
          throw new SnsRejection(503, `cannot fetch the signing certificate: ${err.message}`);
        },
      );
      if (this.certs.size >= 100) this.certs.delete(this.certs.keys().next().value!);
      this.certs.set(url, pending);
      pending.catch(() => this.certs.delete(url));
    }
    return pending;
  }
}
