import { headerValues, platformOwnedRelayHeader, prepareRelayMessage, splitMessage } from './headers';

const msg = (head: string[], body = 'body\r\n') => Buffer.from(head.join('\r\n') + '\r\n\r\n' + body, 'latin1');

test("platform-owned headers: Bcc, X-SES-*, Return-Path, Received, Sender, Feedback-ID, DKIM-Signature, Authentication-Results, ARC-* (any case); the rest are the client's", () => {
  for (const name of [
    'Bcc',
    'BCC',
    'X-SES-CONFIGURATION-SET',
    'x-ses-message-tags',
    'X-SES-SOURCE-ARN',
    'Return-Path',
    'received',
    'Sender',
    'Feedback-ID',
    'DKIM-Signature',
    'authentication-results',
    'ARC-Seal',
    'arc-message-signature',
  ]) {
    expect(platformOwnedRelayHeader(name)).toBe(true);
  }
  for (const name of ['To', 'Cc', 'From', 'Subject', 'X-Sesame', 'X-Custom', 'List-Unsubscribe', 'Archive'])
    expect(platformOwnedRelayHeader(name)).toBe(false);
});

test('splitMessage keeps folded fields whole and the body byte for byte; bare LF is read too', () => {
  const split = splitMessage(msg(['Subject: a', ' folded', 'To: x@y.test'], 'line1\r\n\r\nline2'))!;
  expect(split.fields.map((f) => f.name)).toEqual(['Subject', 'To']);
  expect(headerValues(split, 'subject')).toEqual(['a folded']);
  expect(split.body.toString()).toBe('line1\r\n\r\nline2');
  expect(splitMessage(Buffer.from('Subject: lf\n\nbody'))!.body.toString()).toBe('body');
});

test('splitMessage refuses a header block over 256 KB or a line that is no field', () => {
  expect(splitMessage(msg([`X-Big: ${'a'.repeat(300 * 1024)}`]))).toBeUndefined();
  expect(splitMessage(msg(['not a header line']))).toBeUndefined();
  expect(splitMessage(msg([' continuation first']))).toBeUndefined();
});

test('prepareRelayMessage removes the owned headers (folded lines too), adds Message-ID, Date and MIME-Version only when missing', () => {
  const split = splitMessage(
    msg(['From: a@x.test', 'Bcc: hidden@x.test,', ' other@x.test', 'X-SES-CONFIGURATION-SET: theirs', 'Subject: s']),
  )!;
  const out = prepareRelayMessage(split, 'fallback@x.test', new Date('2026-01-02T03:04:05Z'));
  const text = out.raw.toString('latin1');
  expect(out.removed).toEqual(['Bcc', 'X-SES-CONFIGURATION-SET']);
  expect(text).not.toMatch(/hidden|other@|theirs/);
  expect(text).toContain('Message-ID: <fallback@x.test>\r\n');
  expect(text).toContain('Date: Fri, 02 Jan 2026 03:04:05 +0000\r\n');
  expect(text).toContain('MIME-Version: 1.0\r\n');
  expect(text.endsWith('\r\n\r\nbody\r\n')).toBe(true);
  expect(out).toMatchObject({ messageId: '<fallback@x.test>', clientMessageId: false });

  const own = prepareRelayMessage(
    splitMessage(msg(['Message-ID: <mine@x.test>', 'Date: Thu, 01 Jan 2026 00:00:00 +0000', 'MIME-Version: 1.0']))!,
    'fallback@x.test',
  );
  expect(own).toMatchObject({ messageId: '<mine@x.test>', clientMessageId: true, removed: [] });
  expect(own.raw.toString('latin1').match(/Message-ID|Date|MIME-Version/g)).toHaveLength(3);
});
