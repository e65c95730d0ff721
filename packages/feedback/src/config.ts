/**
 * The feedback slice of the runtime configuration: which SNS messages `POST /webhooks/ses` accepts and when
 * soft bounces suppress an address.
 *
 * @module
 */
import { bool, ConfigError, int, list, str, url, type Env } from '@mailroom/platform/config-env';

/**
 * SNS and soft-bounce settings.
 *
 * @process api
 * @group api
 */
export interface FeedbackConfig {
  /**
   * `SNS_TOPIC_ARNS`: comma-separated SNS topic ARNs whose messages `POST /webhooks/ses` accepts (SES event
   * publishing). Empty: the endpoint refuses every message.
   *
   * @group required
   */
  readonly snsTopicArns: readonly string[];
  /**
   * `SNS_CERT_HOSTS`: comma-separated host patterns a `SigningCertURL` (and a `SubscribeURL`) may point at; `*`
   * stands for one DNS label. Default: Amazon SNS (`sns.*.amazonaws.com`, `sns.*.amazonaws.com.cn`). URLs must be
   * https, except on a loopback host listed here explicitly (tests serve their own certificate there).
   * A pattern is matched against the URL's host *and port* (`URL.host`, case-insensitive): a pattern without a port
   * matches only URLs on the scheme's default port (443 for https, 80 for http; `:443` written out is the same
   * URL), and a URL on any other port needs it in the pattern (`127.0.0.1:8443`). `*` never matches a port.
   */
  readonly snsCertHosts: readonly string[];
  /** `SOFT_BOUNCE_LIMIT`: transient bounces of one address within the window that suppress it (1–1000, default 3). */
  readonly softBounceLimit: number;
  /** `SOFT_BOUNCE_WINDOW_HOURS`: the window of {@link softBounceLimit} (hours, default 72). */
  readonly softBounceWindowHours: number;
  /**
   * `INBOUND_MX_HOST`: the mail exchanger an inbound-enabled domain publishes (its MX record, priority 10): Amazon SES
   * receiving's endpoint of the region. Default `inbound-smtp.<SES_REGION>.amazonaws.com`.
   */
  readonly inboundMxHost: string;
  /**
   * `INBOUND_S3_ENDPOINT`: the S3 endpoint received messages are fetched from when a receipt rule stores them in S3
   * (messages over SNS's 150 KB); unset: Amazon S3 of `SES_REGION` with the AWS credentials. Set for an
   * S3-compatible store (path-style requests).
   */
  readonly inboundS3Endpoint: string | undefined;
  /**
   * `INBOUND_WORKFLOWS_ON_SPAM`: whether a received message that SES judged spam or infected (spam or virus verdict
   * `FAIL`) still records `email.received` on the sender's contact and so starts workflows (default false: it is
   * stored, and announced by webhook, but starts nothing).
   */
  readonly inboundWorkflowsOnSpam: boolean;
}

/**
 * Parses and validates the feedback slice.
 *
 * @param env - the environment (normally `process.env`, passed by the entry point).
 * @returns a frozen {@link FeedbackConfig}.
 * @throws {@link ConfigError} naming the first bad variable.
 */
export function loadFeedbackConfig(env: Env): FeedbackConfig {
  const config: FeedbackConfig = {
    snsTopicArns: list(env, 'SNS_TOPIC_ARNS', []),
    snsCertHosts: list(env, 'SNS_CERT_HOSTS', ['sns.*.amazonaws.com', 'sns.*.amazonaws.com.cn']),
    softBounceLimit: int(env, 'SOFT_BOUNCE_LIMIT', 3, 1, 1000),
    softBounceWindowHours: int(env, 'SOFT_BOUNCE_WINDOW_HOURS', 72, 1, 24 * 365),
    inboundMxHost: str(env, 'INBOUND_MX_HOST', `inbound-smtp.${str(env, 'SES_REGION', 'us-east-1')}.amazonaws.com`),
    inboundS3Endpoint: url(env, 'INBOUND_S3_ENDPOINT', undefined, ['http:', 'https:']),
    inboundWorkflowsOnSpam: bool(env, 'INBOUND_WORKFLOWS_ON_SPAM', false),
  };
  for (const arn of config.snsTopicArns) {
    if (!/^arn:aws[\w-]*:sns:[\w-]+:\d{12}:[\w-]{1,256}$/.test(arn))
      throw new ConfigError('SNS_TOPIC_ARNS', `must list SNS topic ARNs, got "${arn}"`);
  }
  for (const host of config.snsCertHosts) {
    if (!/^[\w*.-]+(:\d+)?$/.test(host)) throw new ConfigError('SNS_CERT_HOSTS', `must list host names, got "${host}"`);
  }
  return Object.freeze(config);
}
