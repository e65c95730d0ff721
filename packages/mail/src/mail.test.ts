import { simpleParser } from 'mailparser';
import { buildMime, type MimeMessage } from './mail';
import { decodeCursor, encodeCursor, newId } from '@mailroom/platform/ids';
import { emailKey, normalizeEmail, domainCovers } from '@mailroom/platform/address';
import { generateKey, hashKey, keyKind } from '@mailroom/projects/keys';

describe('MIME composition', () => {
  test('text and HTML alternatives, attachments, custom headers, RFC 2047 subject, our Message-ID', async () => {
    const raw = await buildMime({
      from: { email: 'a@example.com', name: 'Ärger & Co' },
      to: { email: 'b@example.org' },
      replyTo: 'r@example.com',
      subject: 'Grüße ✓',
      html: '<p>hi</p>',
      text: 'hi',
      headers: { 'X-Ref': 'abc' },
      attachments: [
        { filename: 'f.bin', content: Buffer.from([0, 1, 2, 255]), contentType: 'application/octet-stream' },
      ],
      messageId: 'id-1@example.com',
    });
    const text = raw.toString();
    expect(text).toMatch(/^Subject: =\?UTF-8\?[QB]\?/m);
    expect(text).toContain('multipart/alternative');
    expect(text).toContain('multipart/mixed');
    const m = await simpleParser(raw);
    expect(m.subject).toBe('Grüße ✓');
    expect(m.messageId).toBe('<id-1@example.com>');
    expect(m.from?.value[0]).toEqual({ address: 'a@example.com', name: 'Ärger & Co' });
    expect(m.headers.get('x-ref')).toBe('abc');
    expect([...m.attachments[0].content]).toEqual([0, 1, 2, 255]);
  });

  test('a header value cannot inject another header', async () => {
    const raw = (
      await buildMime({
        from: { email: 'a@example.com' },
        to: { email: 'b@example.org' },
        subject: 'x\r\nBcc: v@x.test',
        html: 'h',
        text: 't',
        headers: { 'X-A': 'v\r\nBcc: v@x.test' },
        messageId: 'm@x',
      })
    ).toString();
    expect(raw).not.toMatch(/^Bcc:/m);
  });

  test('boundaries follow from the content: one message built twice is byte-identical apart from Message-ID and Date', async () => {
    const token = 'AZBhx0b7cTCQkUZtkZ3ZQbK9p2Y1iK0c7Xg5B1eW2dI';
    const message = (over: Partial<MimeMessage> = {}): MimeMessage => ({
      from: { email: 'a@example.com', name: 'A' },
      to: { email: 'b@example.org' },
      subject: 'News',
      html: `<p>hi</p><a href="https://x.test/unsubscribe/${token}">stop</a>`,
      text: `hi https://x.test/unsubscribe/${token}`,
      headers: { 'List-Unsubscribe': `<https://x.test/unsubscribe/${token}>` },
      attachments: [{ filename: 'f.bin', content: Buffer.from([1, 2, 3]), contentType: 'application/octet-stream' }],
      messageId: 'one@example.com',
      date: new Date('2025-01-01T00:00:00Z'),
      perMessage: [token],
      ...over,
    });
    const boundaries = (raw: Buffer) => [
      ...new Set([...raw.toString().matchAll(/boundary="([^"]+)"/g)].map((m) => m[1])),
    ];
    const first = await buildMime(message());
    expect(boundaries(first)).toHaveLength(2);
    const normalise = (raw: Buffer) =>
      raw
        .toString()
        .replace(/^Message-ID: .*\r\n/m, '')
        .replace(/^Date: .*\r\n/m, '');
    const again = await buildMime(message({ messageId: 'two@example.com', date: new Date('2025-06-01T12:00:00Z') }));
    expect(normalise(again)).toBe(normalise(first));
    expect(again.equals(first)).toBe(false);
    // Another unsubscribe token (another email's): the same boundaries; only the token differs.
    const other = 'B'.repeat(43);
    const relinked = await buildMime(
      message({
        html: message().html.replace(token, other),
        text: message().text.replace(token, other),
        headers: { 'List-Unsubscribe': `<https://x.test/unsubscribe/${other}>` },
        perMessage: [other],
      }),
    );
    expect(boundaries(relinked)).toEqual(boundaries(first));
    // (Compared with quoted-printable soft line breaks undone: the token may be cut by one.)
    const unfolded = (raw: Buffer) => normalise(raw).replace(/=\r\n/g, '');
    expect(unfolded(relinked).split(other).join(token)).toBe(unfolded(first));
    // Other content: other boundaries, and none of them occurs in its parts.
    for (const over of [
      { subject: 'News!' },
      { html: '<p>hi.</p>' },
      {
        attachments: [{ filename: 'f.bin', content: Buffer.from([1, 2, 4]), contentType: 'application/octet-stream' }],
      },
    ]) {
      const changed = await buildMime(message(over));
      expect(boundaries(changed)).not.toEqual(boundaries(first));
      expect(changed.toString().split(boundaries(changed)[0]).length).toBe(
        first.toString().split(boundaries(first)[0]).length,
      );
    }
  });
});

describe('ids, addresses and keys', () => {
  test('UUIDv7 ids sort by creation; cursors round-trip and reject forgeries', () => {
    const a = newId();
    const b = newId();
    expect(a < b).toBe(true);
    expect(decodeCursor(encodeCursor(a))).toBe(a);
    expect(() => decodeCursor('abc')).toThrow('cursor');
  });
  test('addresses: domain lower-cased, identity case-insensitive, subdomains covered', () => {
    expect(normalizeEmail('  Ann.Lee@Example.COM ')).toBe('Ann.Lee@example.com');
    expect(emailKey('Ann.Lee@Example.COM')).toBe('ann.lee@example.com');
    expect(domainCovers('example.com', 'mail.example.com')).toBe(true);
    expect(domainCovers('example.com', 'badexample.com')).toBe(false);
  });
  test('keys: prefixed, 32 random bytes, hashed', () => {
    const sk = generateKey('secret');
    expect(sk).toMatch(/^sk_[A-Za-z0-9_-]{43}$/);
    expect(keyKind(sk)).toBe('secret');
    expect(keyKind(generateKey('public'))).toBe('public');
    expect(keyKind('sk_short')).toBeUndefined();
    expect(hashKey(sk)).toMatch(/^[0-9a-f]{64}$/);
    expect(hashKey(sk)).not.toBe(hashKey(generateKey('secret')));
  });
});
