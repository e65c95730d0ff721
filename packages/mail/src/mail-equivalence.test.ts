/**
 * The synchronous MIME writer (`mime-build.ts`, behind `buildMime`) against the reference, nodemailer's streamed
 * build (`buildMimeStreamed`): byte for byte the same message, for varied content and for the many recipients of
 * one campaign (where the shared parts come from the part cache).
 */
import { buildMime, buildMimeStreamed, mimeBaseBoundary, type MimeAttachment, type MimeMessage } from './mail';
import crypto from 'node:crypto';
import MailComposer from 'nodemailer/lib/mail-composer';
import MimeNode from 'nodemailer/lib/mime-node';
import { clearPartCache, partCacheStats, PART_CACHE_LIMITS } from './mime-build';

const DATE = new Date('2025-03-04T05:06:07Z');

function base(over: Partial<MimeMessage> = {}): MimeMessage {
  return {
    from: { email: 'news@example.com', name: 'News' },
    to: { email: 'ann@example.org' },
    subject: 'Hello',
    html: '<p>Hello</p>',
    text: 'Hello',
    messageId: 'm-1@example.com',
    date: DATE,
    ...over,
  };
}

async function expectSame(message: MimeMessage): Promise<Buffer> {
  const reference = await buildMimeStreamed(message);
  const built = await buildMime(message);
  expect(built.toString('latin1')).toBe(reference.toString('latin1'));
  // Written by the synchronous writer, not handed back to nodemailer's stream.
  expect(partCacheStats().refused).toBe(0);
  return built;
}

const longLine = 'Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor. '.repeat(12);
const png = Buffer.from(Array.from({ length: 300 }, (_, i) => (i * 37) % 256));
const attachment = (over: Partial<MimeAttachment> = {}): MimeAttachment => ({
  filename: 'report.pdf',
  content: Buffer.from('%PDF-1.4 binary \u0000\u00ff'),
  contentType: 'application/pdf',
  ...over,
});

const CASES: [string, Partial<MimeMessage>][] = [
  ['plain ASCII text and HTML', {}],
  [
    'non-ASCII subject and names',
    {
      subject: 'Grüße aus Köln ✓ — ваш заказ 注文',
      from: { email: 'a@example.com', name: 'Ärger & Co' },
      to: { email: 'b@example.org', name: 'Zoë "Z" Åberg' },
    },
  ],
  ['a long subject folded', { subject: `Weekly digest: ${'many words here '.repeat(12)}` }],
  ['long lines (quoted-printable soft breaks)', { html: `<p>${longLine}</p>`, text: longLine }],
  ['HTML only', { text: '' }],
  ['text only', { html: '' }],
  ['neither body', { html: '', text: '' }],
  [
    'mostly non-Latin (base64 text parts)',
    { html: '<p>こんにちは世界、ようこそ</p>', text: 'Привет, мир! Добро пожаловать.' },
  ],
  ['LF and CRLF line breaks, trailing spaces', { html: '<p>a</p>\n<p>b</p>  \r\n<p>c</p>\t', text: 'a  \nb\r\nc \n' }],
  ['a lone CR, a trailing CR, control characters', { html: '<p>x\ry</p>\r', text: 'x\u0001y\r' }],
  ['a body ending in a line break', { html: '<p>x</p>\r\n', text: 'x\n' }],
  ['equals signs and dots at line starts', { html: `=3D\n.\n${'=='.repeat(60)}`, text: '.\r\n..\r\nfrom here' }],
  [
    'an HTML body over the encoder slice (64 KiB)',
    { html: `<div>${'<p>ÄÖÜ äöü — text with spaces and words</p>\n'.repeat(1800)}</div>`, text: 'x'.repeat(70_000) },
  ],
  ['reply-to', { replyTo: 'Support <help@example.com>' }],
  [
    'custom headers and List-Unsubscribe',
    {
      headers: [
        ['X-Campaign', 'spring-2025'],
        ['List-Unsubscribe', '<https://x.test/unsubscribe/AZBhx0b7cTCQkUZtkZ3ZQbK9p2Y1iK0c7Xg5B1eW2dI>'],
        ['List-Unsubscribe-Post', 'List-Unsubscribe=One-Click'],
        ['Precedence', 'bulk'],
        ['X-Note', 'Ünïcödé value that is long enough to need folding across more than one header line, surely'],
      ],
    },
  ],
  ['headers as an object', { headers: { 'X-Ref': 'abc', 'X-Other': 'déf' } }],
  ['one attachment', { attachments: [attachment()] }],
  [
    'attachments: binary, text, non-ASCII file name, empty',
    {
      attachments: [
        attachment(),
        attachment({
          filename: 'notes.txt',
          content: Buffer.from('line one\nline two ü\n'),
          contentType: 'text/plain',
        }),
        attachment({ filename: 'Übersicht März.csv', content: Buffer.from('a,b\n1,2\n'), contentType: 'text/csv' }),
        attachment({ filename: 'empty.bin', content: Buffer.alloc(0), contentType: 'application/octet-stream' }),
      ],
    },
  ],
  [
    'an inline cid image (multipart/related)',
    {
      html: '<p><img src="cid:logo@x"></p>',
      attachments: [attachment({ filename: 'logo.png', content: png, contentType: 'image/png', contentId: 'logo@x' })],
    },
  ],
  [
    'inline parts and attachments (mixed, alternative, related)',
    {
      html: '<p><img src="cid:logo@x"><img src="cid:b"></p>',
      attachments: [
        attachment({ filename: 'logo.png', content: png, contentType: 'image/png', contentId: 'logo@x' }),
        attachment({ filename: 'b.gif', content: png.subarray(0, 40), contentType: 'image/gif', contentId: 'b' }),
        attachment(),
        attachment({ filename: 'inline.pdf', disposition: 'inline' }),
      ],
    },
  ],
  [
    'an inline part in an HTML-only message',
    {
      text: '',
      attachments: [attachment({ filename: 'logo.png', content: png, contentType: 'image/png', contentId: 'l' })],
    },
  ],
  ['a text-only message with an attachment', { html: '', attachments: [attachment()] }],
];

describe('buildMime writes the bytes of nodemailer’s streamed build', () => {
  beforeEach(() => clearPartCache());

  test.each(CASES)('%s', async (_name, over) => {
    await expectSame(base(over));
    // Again, with the parts from the cache.
    await expectSame(base({ ...over, messageId: 'm-2@example.com' }));
  });

  test('the recipients of one campaign: shared parts from the cache, per-recipient parts built', async () => {
    const body = `<html><body>${`<p>${longLine}</p>\n`.repeat(10)}</body></html>`;
    const messages = Array.from({ length: 60 }, (_, i): MimeMessage => {
      const token = `tok${i}-${'x'.repeat(40)}`;
      const unsubscribe = `https://mail.example.com/unsubscribe/${token}`;
      // A third of the bodies greet the recipient by name; the rest are the campaign's one body.
      const html = i % 3 === 0 ? body.replace('<body>', `<body><p>Hi Zoë ${i},</p>`) : body;
      return {
        from: { email: 'news@shop.example.com', name: 'Shop Ünited' },
        to: { email: `user${i}@example.org`, ...(i % 2 ? { name: `Recipient Nº${i}` } : {}) },
        subject: i % 4 === 0 ? `Spring news for Zoë ${i} ✓` : 'Spring news ✓',
        html,
        text: `${html.replace(/<[^>]+>/g, '')}`,
        headers: [
          ['List-Unsubscribe', `<${unsubscribe}>`],
          ['List-Unsubscribe-Post', 'List-Unsubscribe=One-Click'],
        ],
        messageId: `0190${i}@shop.example.com`,
        date: DATE,
        perMessage: [token],
      };
    });
    for (const m of messages) await expectSame(m);
    const stats = partCacheStats();
    expect(stats.hits).toBeGreaterThan(60);
    expect(stats.entries).toBeLessThanOrEqual(PART_CACHE_LIMITS.entries);
  });

  test('a part with the message’s own unsubscribe token is neither looked up nor kept', async () => {
    const token = 'T'.repeat(43);
    await expectSame(
      base({ html: `<a href="https://x.test/u/${token}">stop</a>`, text: 'no link here', perMessage: [token] }),
    );
    expect(partCacheStats()).toMatchObject({ entries: 1, misses: 1, hits: 0 });
  });

  test('random messages from mixed pieces', async () => {
    let seed = 42;
    const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    const pick = <T>(xs: T[]): T => xs[rand(xs.length)];
    const texts = ['', 'x', 'Hello\n', longLine, 'ünïcödé\r\nline  ', 'Привет мир', `${'a'.repeat(75)} b`, ' \t'];
    for (let i = 0; i < 150; i++) {
      const attachments = Array.from({ length: rand(3) }, (_, j) =>
        attachment({
          filename: pick(['a.bin', 'ä.png', 'c.txt']),
          content: pick([png, Buffer.from(pick(texts)), Buffer.alloc(0)]),
          contentType: pick(['application/octet-stream', 'image/png', 'text/plain']),
          ...(rand(2) ? { contentId: `c${j}` } : {}),
          ...(rand(4) === 0 ? { disposition: pick(['inline', 'attachment'] as const) } : {}),
        }),
      );
      await expectSame(
        base({
          subject: pick(texts).replace(/[\r\n]/g, '') || 'S',
          html: pick(texts) + pick(texts),
          text: pick(texts),
          to: { email: `r${i}@example.org`, ...(rand(2) ? { name: pick(['Ann', 'Zoë', 'A "B" C']) } : {}) },
          headers: rand(2) ? { 'X-R': pick(texts).replace(/[\r\n]/g, '') || 'v' } : undefined,
          attachments,
        }),
      );
    }
  });

  test('the cache stays within its limits', async () => {
    for (let i = 0; i < PART_CACHE_LIMITS.entries + 20; i++)
      await buildMime(base({ html: `<p>${i}</p>`, text: `${i}` }));
    expect(partCacheStats().entries).toBeLessThanOrEqual(PART_CACHE_LIMITS.entries);
    // A part over the per-part limit is not kept.
    clearPartCache();
    await expectSame(base({ html: 'y'.repeat(PART_CACHE_LIMITS.partBytes), text: '' }));
    expect(partCacheStats().entries).toBe(0);
    expect(partCacheStats().bytes).toBeLessThanOrEqual(PART_CACHE_LIMITS.bytes);
  });
});

describe('mimeBaseBoundary', () => {
  test('gives the boundaries it gave before the builder was rewritten (golden values)', () => {
    const tok = 'AZBhx0b7cTCQkUZtkZ3ZQbK9p2Y1iK0c7Xg5B1eW2dI';
    const messages: MimeMessage[] = [
      base({
        from: { email: 'a@example.com' },
        to: { email: 'b@example.org' },
        subject: 'S',
        html: '<p>h</p>',
        text: 't',
      }),
      base({
        from: { email: 'a@example.com', name: 'Ärger & Co' },
        to: { email: 'b@example.org', name: 'Zoë' },
        replyTo: 'r@x.test',
        // A lone surrogate: hashed as its UTF-8 replacement, as before.
        subject: 'Grüße ✓ \ud800',
        html: `<p>ü ${tok} x</p>`,
        text: `t ${tok}${tok}`,
        headers: [
          ['List-Unsubscribe', `<https://x.test/u/${tok}>`],
          ['X-A', 'é'],
        ],
        perMessage: [tok, ''],
      }),
      base({
        from: { email: 'a@example.com' },
        to: { email: 'b@example.org' },
        subject: 'S',
        html: '',
        text: '',
        headers: { 'X-B': 'v' },
        attachments: [
          { filename: 'f.bin', content: Buffer.from([0, 1, 255]), contentType: 'application/octet-stream' },
          {
            filename: 'l.png',
            content: Buffer.from('png'),
            contentType: 'image/png',
            contentId: 'l@x',
            disposition: 'inline',
          },
        ],
      }),
    ];
    expect(messages.map(mimeBaseBoundary)).toEqual([
      'f37b1e9d3c58109a2c2ca75a',
      '354f8d1ebc5e1fd073e3c063',
      '9b028b2458555094f6849734',
    ]);
  });
});

describe('nodemailer’s own steps the builder keeps cheap', () => {
  test('header names come out as an untouched nodemailer spells them (answers kept per name)', () => {
    type Spelling = { _normalizeHeaderKey(key: unknown): string };
    let Fresh: unknown;
    jest.isolateModules(() => {
      // A MimeNode class loaded apart from this module's: the one nodemailer ships, not sped up.
      // eslint-disable-next-line @typescript-eslint/no-require-imports -- a second, isolated load needs require
      Fresh = require('nodemailer/lib/mime-node');
    });
    expect(Fresh).not.toBe(MimeNode);
    const fresh = new (Fresh as typeof MimeNode)('text/plain') as unknown as Spelling;
    const ours = new MimeNode('text/plain') as unknown as Spelling;
    expect(Object.getOwnPropertyDescriptor(Object.getPrototypeOf(ours), '_normalizeHeaderKey')?.value).not.toBe(
      Object.getOwnPropertyDescriptor(Object.getPrototypeOf(fresh), '_normalizeHeaderKey')?.value,
    );
    const keys: unknown[] = [
      'content-type',
      'Content-Type',
      'MIME-VERSION',
      'x-smtpapi',
      'dkim-signature',
      'list-unsubscribe-post',
      'x-ses-message-id',
      'content-features',
      ' X-Weird\r\nName\u0001 ',
      'return-path',
      '',
      undefined,
      null,
      42,
    ];
    for (let round = 0; round < 2; round++)
      for (const key of keys) expect(ours._normalizeHeaderKey(key)).toBe(fresh._normalizeHeaderKey(key));
  });

  test('a message built with these steps has the bytes an untouched nodemailer builds', async () => {
    let Fresh: unknown;
    jest.isolateModules(() => {
      // MailComposer and its MimeNode loaded apart from this module's: neither step is replaced there.
      // eslint-disable-next-line @typescript-eslint/no-require-imports -- a second, isolated load needs require
      Fresh = require('nodemailer/lib/mail-composer');
    });
    expect(Fresh).not.toBe(MailComposer);
    const pdf = { filename: 'a.pdf', content: Buffer.from('%PDF-1.4 x'), contentType: 'application/pdf' };
    const variants: ConstructorParameters<typeof MailComposer>[0][] = [
      { html: '<p>Grüße</p>', text: 'Grüße' },
      { html: '<p>x</p>', text: 'x', attachments: [pdf] },
      { html: '<img src="cid:logo">', attachments: [{ ...pdf, filename: 'logo.png', cid: 'logo' }] },
      { text: 'only text', headers: { 'x-custom-header': 'v', 'list-unsubscribe': '<https://x.test/u>' } },
    ];
    for (const variant of variants) {
      const options = {
        from: { name: 'Zoë', address: 'a@example.com' },
        to: 'b@example.org',
        subject: 'Hello ✓',
        messageId: '<m@example.com>',
        date: DATE,
        baseBoundary: 'b0b0',
        ...variant,
      };
      const untouched = await new (Fresh as typeof MailComposer)(options).compile().build();
      const ours = await new MailComposer(options).compile().build();
      expect(ours.toString('latin1')).toBe(untouched.toString('latin1'));
    }
  });

  test('the parts MailComposer adds share the root’s base boundary: no random bytes drawn per part', async () => {
    const draws = jest.spyOn(crypto, 'randomBytes');
    try {
      const message = base({
        attachments: [{ filename: 'a.pdf', content: Buffer.from('%PDF'), contentType: 'application/pdf' }],
      });
      const root = new MailComposer({
        from: 'a@example.com',
        to: 'b@example.org',
        html: message.html,
        text: message.text,
        attachments: [{ filename: 'a.pdf', content: Buffer.from('%PDF') }],
        baseBoundary: 'b0b0',
        messageId: '<m@example.com>',
        date: DATE,
      }).compile();
      const nodes: MimeNode[] = [];
      const walk = (n: MimeNode) => {
        nodes.push(n);
        n.childNodes.forEach(walk);
      };
      walk(root);
      expect(nodes.length).toBeGreaterThan(3);
      for (const n of nodes) expect((n as unknown as { baseBoundary: string }).baseBoundary).toBe('b0b0');
      await expectSame(message);
      expect(draws).not.toHaveBeenCalled();
    } finally {
      draws.mockRestore();
    }
  });
});
