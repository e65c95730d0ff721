/**
 * Open and click tracking through SES configuration sets, and custom tracking (redirect) domains.
 *
 * SES rewrites the links of mail sent through a configuration set with an Open or Click event destination to go
 * through a redirect domain: SES's shared `r.<region>.awstrack.me`, unless the set names a custom one
 * (`TrackingOptions.CustomRedirectDomain`). A sending domain's custom tracking domain is a subdomain of it with a
 * CNAME to `r.<region>.awstrack.me`; once the CNAME resolves, one configuration set per base set (the tracked
 * transactional and marketing sets of the domain's delivery connection) is made for it: a copy of the base set
 * (its delivery, reputation, sending and suppression options and its event destinations) with the domain as its
 * custom redirect domain, named by {@link trackingConfigurationSetName}.
 *
 * - {@link SesTrackingSetProvider}: SES v2 (`GetConfigurationSet`, `CreateConfigurationSet`,
 *   `PutConfigurationSetTrackingOptions`, `GetConfigurationSetEventDestinations`,
 *   `CreateConfigurationSetEventDestination`, `UpdateConfigurationSetEventDestination`, `DeleteConfigurationSet`).
 * - {@link LocalTrackingSetProvider}: the SES emulator has no configuration sets: nothing to make.
 *
 * @module
 */
import { createHash } from 'node:crypto';
import {
  CreateConfigurationSetCommand,
  CreateConfigurationSetEventDestinationCommand,
  DeleteConfigurationSetCommand,
  GetConfigurationSetCommand,
  GetConfigurationSetEventDestinationsCommand,
  PutConfigurationSetTrackingOptionsCommand,
  UpdateConfigurationSetEventDestinationCommand,
  type SESv2Client,
} from '@aws-sdk/client-sesv2';
import type { DomainRecord } from '@mailroom/db/schema/domain-record';
import type { MailConfig } from './config';
import { createSesClient } from './ses-client';

/** SES's limit on configuration-set names (characters). */
const SET_NAME_MAX = 64;

/**
 * The name of the configuration set that redirects the tracked mail of base set `base` through `trackingDomain`:
 * `<base>-trk-<12 hex of SHA-256(trackingDomain)>`, the base cut so the whole stays within SES's 64 characters
 * (letters, digits, `_` and `-`, as the base's). Deterministic: every process finds the same name.
 */
export function trackingConfigurationSetName(base: string, trackingDomain: string): string {
  const suffix = `-trk-${createHash('sha256').update(trackingDomain.toLowerCase()).digest('hex').slice(0, 12)}`;
  return `${base.slice(0, SET_NAME_MAX - suffix.length)}${suffix}`;
}

/** SES's regional open/click tracking endpoint, the target of a custom tracking domain's CNAME. */
export function trackingEndpoint(region: string): string {
  return `r.${region}.awstrack.me`;
}

/** The DNS record of a custom tracking domain (`pending`): a CNAME to {@link trackingEndpoint}. */
export function trackingDomainRecord(trackingDomain: string, region: string): DomainRecord {
  return {
    purpose: 'tracking',
    type: 'CNAME',
    name: trackingDomain,
    value: trackingEndpoint(region),
    required: true,
    status: 'pending',
  };
}

// One DNS label: letters, digits and inner hyphens (a scan per label below, no backtracking).
const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/**
 * `input` as a tracking domain of sending domain `domain` (both ASCII, lower case), or why it cannot be one: it
 * must be a host name strictly under `domain` (SES needs the parent domain verified), e.g. `track.example.com`.
 *
 * @returns `{ ok: true, trackingDomain }` (lower case, no trailing dot) or `{ ok: false, message }`.
 */
export function parseTrackingDomain(
  domain: string,
  input: string,
): { ok: true; trackingDomain: string } | { ok: false; message: string } {
  const name = input.trim().toLowerCase().replace(/\.$/, '');
  if (name.length === 0 || name.length > 253 || !name.split('.').every((l) => LABEL.test(l))) {
    return { ok: false, message: 'must be a host name such as track.example.com' };
  }
  if (!name.endsWith(`.${domain}`))
    return { ok: false, message: `must be a subdomain of ${domain}, such as track.${domain}` };
  return { ok: true, trackingDomain: name };
}

/** Makes and removes the configuration sets of custom tracking domains. */
export interface TrackingSetProvider {
  /**
   * Makes (or brings up to date) set `name` as a copy of set `base` whose open and click links go through
   * `redirectDomain`; a set that exists already gets the redirect domain and the base's event destinations.
   *
   * @throws the provider's error (classify it with `identityFailure`).
   */
  ensure(name: string, base: string, redirectDomain: string): Promise<void>;
  /** Removes set `name` (a missing one is fine). */
  remove(name: string): Promise<void>;
}

const errName = (err: unknown) => (err as { name?: string }).name;

/** Configuration sets in Amazon SES v2. */
export class SesTrackingSetProvider implements TrackingSetProvider {
  private readonly client: SESv2Client;

  constructor(
    config: Pick<MailConfig, 'sesRegion' | 'sesEndpoint' | 'awsCredentials'> & { sesProfile?: string },
    client?: SESv2Client,
  ) {
    this.client = client ?? createSesClient(config);
  }

  async ensure(name: string, base: string, redirectDomain: string): Promise<void> {
    const from = await this.client.send(new GetConfigurationSetCommand({ ConfigurationSetName: base }));
    const tracking = { CustomRedirectDomain: redirectDomain, HttpsPolicy: 'OPTIONAL' as const };
    try {
      await this.client.send(
        new CreateConfigurationSetCommand({
          ConfigurationSetName: name,
          TrackingOptions: tracking,
          ...(from.DeliveryOptions ? { DeliveryOptions: from.DeliveryOptions } : {}),
          ...(from.ReputationOptions
            ? { ReputationOptions: { ReputationMetricsEnabled: from.ReputationOptions.ReputationMetricsEnabled } }
            : {}),
          ...(from.SendingOptions ? { SendingOptions: from.SendingOptions } : {}),
          ...(from.SuppressionOptions ? { SuppressionOptions: from.SuppressionOptions } : {}),
        }),
      );
    } catch (err) {
      if (errName(err) !== 'AlreadyExistsException') throw err;
      await this.client.send(
        new PutConfigurationSetTrackingOptionsCommand({ ConfigurationSetName: name, ...tracking }),
      );
    }
    const destinations =
      (await this.client.send(new GetConfigurationSetEventDestinationsCommand({ ConfigurationSetName: base })))
        .EventDestinations ?? [];
    for (const d of destinations) {
      if (!d.Name) continue;
      const definition = {
        Enabled: d.Enabled,
        MatchingEventTypes: d.MatchingEventTypes,
        ...(d.SnsDestination ? { SnsDestination: d.SnsDestination } : {}),
        ...(d.KinesisFirehoseDestination ? { KinesisFirehoseDestination: d.KinesisFirehoseDestination } : {}),
        ...(d.CloudWatchDestination ? { CloudWatchDestination: d.CloudWatchDestination } : {}),
        ...(d.PinpointDestination ? { PinpointDestination: d.PinpointDestination } : {}),
        ...(d.EventBridgeDestination ? { EventBridgeDestination: d.EventBridgeDestination } : {}),
      };
      try {
        await this.client.send(
          new CreateConfigurationSetEventDestinationCommand({
            ConfigurationSetName: name,
            EventDestinationName: d.Name,
            EventDestination: definition,
          }),
        );
      } catch (err) {
        if (errName(err) !== 'AlreadyExistsException') throw err;
        await this.client.send(
          new UpdateConfigurationSetEventDestinationCommand({
            ConfigurationSetName: name,
            EventDestinationName: d.Name,
            EventDestination: definition,
          }),
        );
      }
    }
  }

  async remove(name: string): Promise<void> {
    try {
      await this.client.send(new DeleteConfigurationSetCommand({ ConfigurationSetName: name }));
    } catch (err) {
      if (errName(err) !== 'NotFoundException') throw err;
    }
  }
}

/** For the SES emulator, which has no configuration sets: nothing is made, sends name the set all the same. */
export class LocalTrackingSetProvider implements TrackingSetProvider {
  ensure(): Promise<void> {
    return Promise.resolve();
  }

  remove(): Promise<void> {
    return Promise.resolve();
  }
}

/** The provider `DOMAIN_IDENTITY_PROVIDER` selects (`ses`: SES v2 on `connection`'s account; `local`: none). */
export function createTrackingSetProvider(
  config: Pick<MailConfig, 'domainIdentityProvider'>,
  connection: Pick<MailConfig, 'sesRegion' | 'sesEndpoint' | 'awsCredentials'> & { sesProfile?: string },
): TrackingSetProvider {
  return config.domainIdentityProvider === 'ses'
    ? new SesTrackingSetProvider(connection)
    : new LocalTrackingSetProvider();
}
