/**
 * A DNS record a sending domain publishes (DKIM, MAIL FROM, DMARC, the custom tracking domain), with its state as last checked: the shape
 * stored in `domains.records`.
 *
 * @module
 */

/** One record to publish. */
export interface DomainRecord {
  purpose: 'dkim' | 'mail-from-mx' | 'mail-from-spf' | 'dmarc' | 'tracking';
  type: 'CNAME' | 'TXT' | 'MX';
  name: string;
  value: string;
  priority?: number;
  required: boolean;
  status: 'pending' | 'found' | 'failed';
}
