/**
 * The SES v2 client of the control-plane calls (identities, account): region, endpoint (the emulator), and
 * credentials from config. The send path builds its own (`packages/sending/src/ses/transport.ts`: timeouts, the
 * rate-gate middleware).
 *
 * @module
 */
import { SESv2Client } from '@aws-sdk/client-sesv2';
import type { MailConfig } from './config';

/**
 * A client for `config`: explicit credentials when set, placeholder ones against an `SES_ENDPOINT` (the
 * emulator takes any), else the AWS default chain.
 *
 * @param opts.maxAttempts - SDK attempts per call (default 3).
 * @param opts.timeoutMs - longest one attempt may take, connecting included (ms); unset: the SDK's default.
 */
export function createSesClient(
  config: Pick<MailConfig, 'sesRegion' | 'sesEndpoint' | 'awsCredentials'>,
  opts: { maxAttempts?: number; timeoutMs?: number } = {},
): SESv2Client {
  return new SESv2Client({
    region: config.sesRegion,
    ...(config.sesEndpoint ? { endpoint: config.sesEndpoint } : {}),
    credentials: config.awsCredentials ?? (config.sesEndpoint ? { accessKeyId: 'local', secretAccessKey: 'local' } : undefined),
    maxAttempts: opts.maxAttempts ?? 3,
    // Without throwOnRequestTimeout the SDK only warns when requestTimeout passes and keeps waiting.
    ...(opts.timeoutMs ? { requestHandler: { connectionTimeout: Math.min(5_000, opts.timeoutMs), requestTimeout: opts.timeoutMs, throwOnRequestTimeout: true } } : {}),
  });
}
