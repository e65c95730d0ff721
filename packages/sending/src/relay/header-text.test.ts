/**
 * The relay's From and Subject reading (`./header-text`) answers what mailparser (which the relay used before)
 * reads from the same header block, for plain, folded, encoded, 8-bit, grouped and malformed fields; except that
 * a From naming more than one sender is no sender at all, where mailparser takes the first.
 */
import { simpleParser } from 'mailparser';
import { splitMessage } from './headers';
import { relayFrom, relaySubject } from './header-text';

const cases: string[] = [
  'From: b@example.com\r\nSubject: Hello\r\n',
  'From: "Ann, Sales" <ann@example.com>\r\nSubject: =?UTF-8?B?SGVsbG8gw6l0w6k=?=\r\n',
  'From: =?ISO-8859-1?Q?Andr=E9?= <andre@example.com>\r\nSubject: =?UTF-8?Q?caf=C3=A9?= and more\r\n',
  'From: Ann\r\n <ann@example.com>\r\nSubject: a long\r\n\tfolded subject\r\n',
  'From: Team: ann@example.com, bob@example.com;\r\nSubject:\r\nSubject: second\r\n',
  'From: not an address\r\nSubject: x\r\n',
  'From: =?UTF-8?B?YUBldmlsLmNvbQ==?= <ann@example.com>\r\n',
  'From: <=?UTF-8?B?YUBldmlsLmNvbQ==?=>\r\n',
  'From: ann@example.com (Ann the comment)\r\n',
  'Subject: no from\r\n',
  `From: ${Buffer.from('Zoë <zoe@example.com>', 'utf8').toString('latin1')}\r\nSubject: ${Buffer.from('Grüße 🙂', 'utf8').toString('latin1')}\r\n`,
];

test.each(cases)('reads From and Subject as mailparser does: %j', async (head) => {
  const raw = Buffer.from(`${head}\r\nbody\r\n`, 'latin1');
  const split = splitMessage(raw)!;
  const parsed = await simpleParser(Buffer.concat(split.fields.map((f) => Buffer.from(f.raw, 'latin1'))), {
    skipHtmlToText: true,
    skipTextToHtml: true,
  });
  const expected = parsed.from?.value.find((a) => a.address);
  const got = relayFrom(split);
  expect(got ? { address: got.address, name: got.name } : undefined).toEqual(
    expected ? { address: expected.address, name: expected.name } : undefined,
  );
  expect(relaySubject(split)).toBe(parsed.subject ?? '');
});

test.each([
  'From: Undisclosed:;, Bob <bob@example.com>\r\n',
  'From: first@example.com\r\nFrom: second@example.com\r\n',
  'From: ann@example.com, ceo@victim.example.org\r\n',
])('a From naming more than one sender (mailparser would take the first) gives no sender: %j', (head) => {
  expect(relayFrom(splitMessage(Buffer.from(`${head}\r\nbody\r\n`, 'latin1'))!)).toBeUndefined();
});
