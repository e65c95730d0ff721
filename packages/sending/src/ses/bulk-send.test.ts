/**
 * The `SendBulkEmail` request and answer (`bulk-send.ts`): the addresses as header values, what an email needs to go
 * in a bulk call as it would go raw, the input SES is given, and each entry's status read as the error
 * `classifySendError` classifies as it would classify a one-message send's.
 */
import {
  BULK_MAX_HEADERS,
  bulkEligible,
  bulkEmailInput,
  bulkEntryOutcomes,
  mailboxHeader,
  PASSTHROUGH_TEMPLATE,
} from './bulk-send';
import { classifySendError } from './transport';

test('mailboxHeader: a plain name as is, specials quoted, anything outside ASCII in RFC 2047 encoded words', () => {
  expect(mailboxHeader('a@x.test')).toBe('a@x.test');
  expect(mailboxHeader('a@x.test', 'Ann Lee')).toBe('Ann Lee <a@x.test>');
  expect(mailboxHeader('a@x.test', 'Lee, "Ann"')).toBe('"Lee, \\"Ann\\"" <a@x.test>');
  expect(mailboxHeader('a@x.test', 'Zoë')).toBe('=?UTF-8?Q?Zo=C3=AB?= <a@x.test>');
});

test('bulkEligible: no attachments, ASCII addresses, at most 15 headers SES takes as they are, data within the limit', () => {
  const email = { attachmentIds: [] as string[], toEmail: 'a@x.test', fromEmail: 'n@y.test' };
  const ok: [string, string][] = [['List-Unsubscribe', '<https://u.test/x>']];
  expect(bulkEligible(email, ok)).toBe(true);
  expect(bulkEligible({ ...email, attachmentIds: ['f'] }, ok)).toBe(false);
  expect(bulkEligible({ ...email, toEmail: 'zoë@x.test' }, ok)).toBe(false);
  expect(bulkEligible(email, [['X-Note', 'café']])).toBe(false);
  expect(bulkEligible(email, [['X-Note', 'x'.repeat(871)]])).toBe(false);
  expect(bulkEligible(email, [['X:Note', 'x']])).toBe(false);
  expect(bulkEligible({ ...email, replyTo: 'Zoë <r@y.test>' }, ok)).toBe(false);
  expect(bulkEligible({ ...email, replyTo: 'r@y.test' }, ok)).toBe(true);
  expect(bulkEligible(email, ok, 262_144)).toBe(true);
  expect(bulkEligible(email, ok, 262_145)).toBe(false);
  const many = Array.from({ length: BULK_MAX_HEADERS + 1 }, (_, i): [string, string] => [`X-H${i}`, 'v']);
  expect(bulkEligible(email, many.slice(0, BULK_MAX_HEADERS))).toBe(true);
  expect(bulkEligible(email, many)).toBe(false);
});

test('bulkEmailInput: the inline pass-through template, one entry per email with its data, headers and tags', () => {
  const input = bulkEmailInput(
    {
      from: 'News <n@y.test>',
      replyTo: ['r@y.test'],
      entries: [
        {
          to: 'a@x.test',
          data: '{"subject":"S","html":"<p>H</p>","text":"T"}',
          headers: [['Precedence', 'bulk']],
          tags: { email_id: 'e1' },
          key: 'e1',
        },
      ],
    },
    'marketing-set',
  );
  expect(input).toEqual({
    FromEmailAddress: 'News <n@y.test>',
    ReplyToAddresses: ['r@y.test'],
    ConfigurationSetName: 'marketing-set',
    DefaultContent: { Template: { TemplateContent: PASSTHROUGH_TEMPLATE, TemplateData: '{}' } },
    BulkEmailEntries: [
      {
        Destination: { ToAddresses: ['a@x.test'] },
        ReplacementEmailContent: {
          ReplacementTemplate: { ReplacementTemplateData: '{"subject":"S","html":"<p>H</p>","text":"T"}' },
        },
        ReplacementHeaders: [{ Name: 'Precedence', Value: 'bulk' }],
        ReplacementTags: [{ Name: 'email_id', Value: 'e1' }],
      },
    ],
  });
  expect(bulkEmailInput({ from: 'n@y.test', entries: [] }, undefined)).not.toHaveProperty('ConfigurationSetName');
});

test('bulkEntryOutcomes: SUCCESS is a message id; each failed status classified as a one-message error would be', () => {
  const statuses = [
    'SUCCESS',
    'MESSAGE_REJECTED',
    'ACCOUNT_THROTTLED',
    'ACCOUNT_DAILY_QUOTA_EXCEEDED',
    'ACCOUNT_SENDING_PAUSED',
    'MAIL_FROM_DOMAIN_NOT_VERIFIED',
    'INVALID_PARAMETER_VALUE',
    'TRANSIENT_FAILURE',
    'FAILED',
  ];
  const outcomes = bulkEntryOutcomes(
    statuses.map((Status, i) => ({ Status: Status as never, MessageId: `m${i}`, Error: 'why' })),
    statuses.length + 1,
  );
  expect(outcomes[0]).toEqual({ messageId: 'm0' });
  const kinds = outcomes.slice(1).map((o) => ('error' in o ? classifySendError(o.error).kind : 'sent'));
  expect(kinds).toEqual([
    'permanent',
    'throttled',
    'throttled',
    'throttled',
    'permanent',
    'permanent',
    'transient',
    'transient',
    // No result for the last entry: not confirmed sent, a transient failure.
    'transient',
  ]);
  expect('error' in outcomes[1] && outcomes[1].error.message).toBe('SendBulkEmail entry MESSAGE_REJECTED: why');
});
