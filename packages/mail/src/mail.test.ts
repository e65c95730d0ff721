import { simpleParser } from 'mailparser';
import { buildMime, checkCustomHeaders } from './mail';
import { decodeCursor, encodeCursor, newId } from '@mailroom/platform/ids';
import { emailKey, normalizeEmail, domainCovers } from '@mailroom/platform/address';
import { generateKey, hashKey, keyKind } from '@mailroom/platform/keys';

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
      attachments: [{ filename: 'f.bin', content: Buffer.from([0, 1, 2, 255]), contentType: 'application/octet-stream' }],
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
    const raw = (await buildMime({ from: { email: 'a@example.com' }, to: { email: 'b@example.org' }, subject: 'x\r\nBcc: v@x.test', html: 'h', text: 't', headers: { 'X-A': 'v\r\nBcc: v@x.test' }, messageId: 'm@x' })).toString();
    expect(raw).not.toMatch(/^Bcc:/m);
  });

  test('custom header checks', () => {
    expect(checkCustomHeaders({ 'X-Ok': 'fine' })).toEqual([]);
    expect(checkCustomHeaders({ Subject: 'x', 'Message-ID': 'y' }).map((e) => e.field)).toEqual(['headers.Subject', 'headers.Message-ID']);
    expect(checkCustomHeaders({ 'X:Bad': 'v' })[0].code).toBe('invalid_string');
    expect(checkCustomHeaders({ 'X-Nl': 'a\nb' })[0].code).toBe('invalid_string');
    expect(checkCustomHeaders({ 'X-Long': 'x'.repeat(3000) })[0].code).toBe('too_big');
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
