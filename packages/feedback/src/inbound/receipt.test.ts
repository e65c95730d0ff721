import { isReceiptRecord, parseSesReceipt } from './receipt';
import { triggersWorkflows } from './receive';

const base = {
  notificationType: 'Received',
  mail: { timestamp: '2026-01-01T00:00:00.000Z', messageId: 'abc123', destination: ['Support@Example.com'] },
  receipt: {
    recipients: ['Support@Example.com'],
    spamVerdict: { status: 'PASS' },
    virusVerdict: { status: 'FAIL' },
    spfVerdict: { status: 'gray' },
    action: { type: 'SNS', encoding: 'BASE64' },
  },
};

test('receipt notifications are told from sending events', () => {
  expect(isReceiptRecord(base)).toBe(true);
  expect(isReceiptRecord({ eventType: 'Delivery', mail: {} })).toBe(false);
  expect(isReceiptRecord('nonsense')).toBe(false);
});

test('inline BASE64 and UTF8 content, S3 actions, and actions without content', () => {
  const inline = parseSesReceipt({ ...base, content: Buffer.from('Subject: hi\r\n\r\nx').toString('base64') });
  expect(inline).toMatchObject({
    sesMessageId: 'abc123',
    recipients: ['support@example.com'],
    receivedAt: new Date('2026-01-01T00:00:00.000Z'),
  });
  expect(inline.verdicts).toEqual({ spam: 'PASS', virus: 'FAIL', spf: 'GRAY', dkim: null, dmarc: null });
  expect(inline.content.kind === 'inline' && inline.content.raw.toString()).toBe('Subject: hi\r\n\r\nx');
  const utf8 = parseSesReceipt({
    ...base,
    receipt: { ...base.receipt, action: { type: 'SNS', encoding: 'UTF8' } },
    content: 'Subject: é',
  });
  expect(utf8.content.kind === 'inline' && utf8.content.raw.toString()).toBe('Subject: é');
  const s3 = parseSesReceipt({
    ...base,
    receipt: { ...base.receipt, action: { type: 'S3', bucketName: 'b', objectKey: 'k/1' } },
  });
  expect(s3.content).toEqual({ kind: 's3', bucket: 'b', key: 'k/1' });
  expect(parseSesReceipt({ ...base, receipt: { ...base.receipt, action: { type: 'Lambda' } } }).content).toEqual({
    kind: 'none',
    actionType: 'Lambda',
  });
  expect(() => parseSesReceipt({ notificationType: 'Received', mail: {} })).toThrow('mail.messageId');
});

test('spam or virus FAIL starts no workflow unless configured', () => {
  const v = { spam: 'PASS', virus: 'PASS', spf: null, dkim: null, dmarc: null };
  expect(triggersWorkflows(v, false)).toBe(true);
  expect(triggersWorkflows({ ...v, virus: 'FAIL' }, false)).toBe(false);
  expect(triggersWorkflows({ ...v, spam: 'FAIL' }, false)).toBe(false);
  expect(triggersWorkflows({ ...v, spam: 'FAIL' }, true)).toBe(true);
});
