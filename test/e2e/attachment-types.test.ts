/**
 * Attachment content types on `POST /v1/send`: a composite type (`multipart/*`, `message/*`), which the message
 * would not carry as an attachment, is refused with 422 naming `attachments.N.contentType` and nothing is
 * written; every file type accepted arrives at SES as an attachment with its bytes, name and type (worker → SES
 * emulator, through the recording proxy), and a `.eml` file without a given type arrives as
 * `application/octet-stream`.
 */
import request from 'supertest';
import { randomBytes } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { parseMail, recipient, sesSendsTo, waitFor } from '../support/harness';
import { useE2e } from '../support/e2e';

const e2e = useE2e({ env: { SES_MAX_SEND_RATE: '100' }, project: true });

const send = (body: object) => request(e2e.api.app).post('/v1/send').set('Authorization', e2e.p.auth).send(body);
const b64 = (s: string | Buffer) => Buffer.from(s).toString('base64');

test.each([
  'multipart/mixed',
  'multipart/alternative',
  'message/rfc822',
  'MESSAGE/RFC822',
  'message/global',
  'message/partial',
])('422 for an attachment of type %s, naming attachments.N.contentType; nothing written', async (contentType) => {
  const to = recipient('att');
  const filename = `f-${randomBytes(4).toString('hex')}.bin`;
  const res = await send({
    to,
    from: `x@${e2e.p.domain}`,
    subject: 's',
    body: 'b',
    attachments: [
      { filename: 'ok.txt', content: b64('fine') },
      { filename, content: b64('Subject: hi\r\n\r\nhello'), contentType },
    ],
  });
  expect(res.status).toBe(422);
  expect(res.body.error.code).toBe('VALIDATION_ERROR');
  expect(res.body.error.errors).toEqual([
    expect.objectContaining({ field: 'attachments.1.contentType', code: 'invalid_string' }),
  ]);
  const files = await e2e.api.database.db.execute<{ n: number }>(
    sql`select count(*)::int as n from attachments where project_id = ${e2e.p.id}::uuid and filename = ${filename}`,
  );
  expect(files.rows[0].n).toBe(0);
  const rows = await e2e.api.database.db.execute<{ n: number }>(
    sql`select count(*)::int as n from emails where project_id = ${e2e.p.id}::uuid and to_email = ${to}`,
  );
  expect(rows.rows[0].n).toBe(0);
});

test('every error is listed: two composite attachments give two errors', async () => {
  const res = await send({
    to: recipient('att'),
    from: `x@${e2e.p.domain}`,
    subject: 's',
    body: 'b',
    attachments: [
      { filename: 'a', content: b64('a'), contentType: 'multipart/related' },
      { filename: 'b', content: b64('b'), contentType: 'text/plain' },
      { filename: 'c', content: b64('c'), contentType: 'message/rfc822' },
    ],
  });
  expect(res.status).toBe(422);
  expect(res.body.error.errors.map((e: { field: string }) => e.field)).toEqual([
    'attachments.0.contentType',
    'attachments.2.contentType',
  ]);
});

test('accepted types arrive at SES as attachments with their bytes, names and types', async () => {
  const png = randomBytes(5000);
  const pdf = Buffer.concat([Buffer.from('%PDF-1.4\n'), randomBytes(3000)]);
  const eml = 'From: a@b.test\r\nTo: c@d.test\r\nSubject: forwarded\r\n\r\nthe forwarded body\r\n';
  const files = [
    {
      filename: 'report.pdf',
      content: b64(pdf),
      contentType: 'application/pdf',
      expect: { type: 'application/pdf', bytes: pdf },
    },
    { filename: 'pixel.png', content: b64(png), expect: { type: 'image/png', bytes: png } },
    {
      filename: 'invite.ics',
      content: b64('BEGIN:VCALENDAR\r\nEND:VCALENDAR\r\n'),
      contentType: 'text/calendar',
      expect: { type: 'text/calendar', bytes: Buffer.from('BEGIN:VCALENDAR\r\nEND:VCALENDAR\r\n') },
    },
    {
      filename: 'page.html',
      content: b64('<p>an html file</p>'),
      contentType: 'text/html',
      expect: { type: 'text/html', bytes: Buffer.from('<p>an html file</p>') },
    },
    {
      filename: 'data.json',
      content: b64('{"a":1}'),
      contentType: 'application/json',
      expect: { type: 'application/json', bytes: Buffer.from('{"a":1}') },
    },
    // The name implies message/rfc822: sent as a plain file.
    {
      filename: 'forwarded.eml',
      content: b64(eml),
      expect: { type: 'application/octet-stream', bytes: Buffer.from(eml) },
    },
  ];
  const to = recipient('att');
  const res = await send({
    to,
    from: `x@${e2e.p.domain}`,
    subject: 'files',
    body: '<p>see attached</p>',
    attachments: files.map(({ expect: _e, ...f }) => f),
  });
  expect(res.status).toBe(202);
  const [sent] = await waitFor(
    async () => {
      const s = await sesSendsTo([to]);
      return s.length > 0 ? s : undefined;
    },
    30_000,
    'the send at SES',
  );
  const mail = await parseMail(sent);
  expect(mail.html).toContain('see attached');
  expect(mail.attachments.map((a) => a.filename)).toEqual(files.map((f) => f.filename));
  mail.attachments.forEach((a, i) => {
    expect(Buffer.compare(a.content, files[i].expect.bytes)).toBe(0);
  });
  // The type on the wire (the parser itself guesses from the name for application/octet-stream), as an attachment.
  for (const f of files) {
    const escaped = f.filename.replace(/\./g, '\\.');
    expect(sent.raw).toMatch(
      new RegExp(
        `^Content-Type: ${f.expect.type.replace('/', '\\/')}; name=${escaped}\r\nContent-Transfer-Encoding: base64\r\nContent-Disposition: attachment; filename=${escaped}\r$`,
        'm',
      ),
    );
  }
});
