/**
 * The SES v2 client of the control-plane calls (identities, account): region, endpoint (the emulator), and
 * credentials from config. The send path builds its own (`packages/sending/src/ses/transport.ts`: timeouts, the
 * rate-gate middleware).
 *
 * @module
 */
import { GetAccountCommand, GetEmailIdentityCommand, SESv2Client } from '@aws-sdk/client-sesv2';
import type { MailConfig } from './config';

/**
 * A client for `config`: explicit credentials when set, else the named profile (`sesProfile`), placeholder ones against an `SES_ENDPOINT` (the
 * emulator takes any), else the AWS default chain.
 *
 * @param opts.maxAttempts - SDK attempts per call (default 3).
 * @param opts.timeoutMs - longest one attempt may take, connecting included (ms); unset: the SDK's default.
 */
export function createSesClient(
  config: Pick<MailConfig, 'sesRegion' | 'sesEndpoint' | 'awsCredentials'> & { sesProfile?: string },
  opts: { maxAttempts?: number; timeoutMs?: number } = {},
): SESv2Client {
  return new SESv2Client({
    region: config.sesRegion,
    ...(config.sesEndpoint ? { endpoint: config.sesEndpoint } : {}),
    credentials:
      config.awsCredentials ??
      (config.sesEndpoint && !config.sesProfile ? { accessKeyId: 'local', secretAccessKey: 'local' } : undefined),
    // A named profile of the AWS shared config files (a delivery connection's `profile`: it may assume a role).
    ...(config.sesProfile ? { profile: config.sesProfile } : {}),
    maxAttempts: opts.maxAttempts ?? 3,
    // Without throwOnRequestTimeout the SDK only warns when requestTimeout passes and keeps waiting.
    ...(opts.timeoutMs
      ? {
          requestHandler: {
            connectionTimeout: Math.min(5_000, opts.timeoutMs),
            requestTimeout: opts.timeoutMs,
            throwOnRequestTimeout: true,
          },
        }
      : {}),
  });
}

/**
 * Whether `domain`'s identity is verified for sending in the account `client` reaches (SES v2
 * `GetEmailIdentity`, `VerifiedForSendingStatus`).
 * @throws the SES error (`NotFoundException` when the account has no such identity).
 */
export async function identityVerifiedForSending(client: SESv2Client, domain: string): Promise<boolean> {
  return Boolean((await client.send(new GetEmailIdentityCommand({ EmailIdentity: domain }))).VerifiedForSendingStatus);
}

/** A harmless call to the account `client` reaches (SES v2 `GetAccount`): a probe of its health. @throws the SES error. */
export async function probeAccount(client: SESv2Client): Promise<void> {
  await client.send(new GetAccountCommand({}));
}
