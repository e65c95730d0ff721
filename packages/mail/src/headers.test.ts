import { checkCustomHeaders, headerProblems, isPlatformHeader, messageHeaders, sanitizeHeaders } from './headers';

const transactional = { marketing: false };
const marketing = { marketing: true };
const URL = 'https://mail.example/unsubscribe/tok';

describe('custom header rule', () => {
  test('every platform-owned header is refused in any letter case, naming it as given', () => {
    const owned = [
      'X-SES-CONFIGURATION-SET',
      'X-SES-MESSAGE-TAGS',
      'X-SES-SOURCE-ARN',
      'X-SES-FROM-ARN',
      'X-SES-RETURN-PATH-ARN',
      'x-ses-anything',
      'From',
      'to',
      'CC',
      'Bcc',
      'reply-TO',
      'Subject',
      'DATE',
      'Message-Id',
      'mime-version',
      'Content-Type',
      'content-transfer-encoding',
      'Content-Whatever',
      'Return-Path',
      'Sender',
      'dkim-signature',
      'Received',
      'Feedback-ID',
      'ARC-Seal',
      'Authentication-Results',
    ];
    for (const name of owned) {
      expect(isPlatformHeader(name)).toBe(true);
      expect(checkCustomHeaders({ [name]: 'v' }, transactional)).toEqual([
        { field: `headers.${name}`, message: expect.stringContaining('set by the platform'), code: 'custom' },
      ]);
    }
    expect(checkCustomHeaders({ 'X-Ok': 'fine', 'In-Reply-To': '<a@b>', References: '<a@b>' }, marketing)).toEqual([]);
  });

  test('names, values and counts', () => {
    expect(checkCustomHeaders({ 'X:Bad': 'v' }, transactional)[0].code).toBe('invalid_string');
    expect(checkCustomHeaders({ 'X Bad': 'v' }, transactional)[0].code).toBe('invalid_string');
    expect(checkCustomHeaders({ 'X-Nl': 'a\nb' }, transactional)[0].code).toBe('invalid_string');
    expect(checkCustomHeaders({ 'X-Long': 'x'.repeat(3000) }, transactional)[0].code).toBe('too_big');
    expect(
      checkCustomHeaders(Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`X-${i}`, 'v'])), transactional),
    ).toEqual([{ field: 'headers', message: 'at most 50 headers', code: 'too_big' }]);
  });

  test('a name given twice in other letter cases is refused', () => {
    expect(checkCustomHeaders({ 'X-Tag': 'a', 'x-tag': 'b' }, transactional).map((e) => e.field)).toEqual([
      'headers.x-tag',
    ]);
    expect(
      checkCustomHeaders(
        { 'List-Unsubscribe': '<https://a.test/u>', 'list-unsubscribe': '<https://b.test/u>' },
        transactional,
      ).map((e) => e.field),
    ).toEqual(['headers.list-unsubscribe']);
  });

  test("marketing mail refuses a caller's unsubscribe pair and says why; transactional takes it", () => {
    const marketingErrors = checkCustomHeaders(
      { 'list-UNSUBSCRIBE': '<https://a.test/u>', 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' },
      marketing,
    );
    expect(marketingErrors.map((e) => e.field)).toEqual(['headers.list-UNSUBSCRIBE', 'headers.List-Unsubscribe-Post']);
    expect(marketingErrors[0].message).toMatch(/marketing mail.*platform's one-click List-Unsubscribe/);
    expect(
      checkCustomHeaders(
        { 'list-unsubscribe': '<https://a.test/u>', 'LIST-UNSUBSCRIBE-POST': 'List-Unsubscribe=One-Click' },
        transactional,
      ),
    ).toEqual([]);
    expect(
      checkCustomHeaders({ 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' }, transactional)[0],
    ).toMatchObject({
      field: 'headers.List-Unsubscribe-Post',
      message: expect.stringContaining('needs a List-Unsubscribe'),
    });
  });

  test('a raw header list is filtered by the same rule', () => {
    const { kept, dropped } = sanitizeHeaders(
      [
        ['X-SES-Source-Arn', 'arn:aws:ses:x'],
        ['X-Keep', '1'],
        ['list-unsubscribe', '<https://a.test>'],
        ['X-Keep', '2'],
      ],
      marketing,
    );
    expect(kept).toEqual([['X-Keep', '1']]);
    expect(dropped.map((d) => d.name)).toEqual(['X-SES-Source-Arn', 'list-unsubscribe', 'X-Keep']);
    expect(headerProblems([['X-SES-MESSAGE-TAGS', 'a=b']], transactional)[0]).toMatchObject({
      index: 0,
      name: 'X-SES-MESSAGE-TAGS',
    });
  });
});

describe('the header list of a message', () => {
  const names = (h: [string, string][]) => h.map(([n]) => n.toLowerCase());

  test('marketing: bulk headers and exactly one platform unsubscribe pair, whatever was stored', () => {
    const { headers, dropped } = messageHeaders(
      { 'list-unsubscribe': '<https://evil.test>', 'X-SES-CONFIGURATION-SET': 'other', 'X-A': 'a' },
      {
        ...marketing,
        unsubscribeUrl: URL,
        bodyLinksUnsubscribe: false,
      },
    );
    expect(headers).toEqual([
      ['X-A', 'a'],
      ['Precedence', 'bulk'],
      ['Auto-Submitted', 'auto-generated'],
      ['X-Auto-Response-Suppress', 'All'],
      ['List-Unsubscribe', `<${URL}>`],
      ['List-Unsubscribe-Post', 'List-Unsubscribe=One-Click'],
    ]);
    expect(dropped.map((d) => d.name)).toEqual(['list-unsubscribe', 'X-SES-CONFIGURATION-SET']);
  });

  test("marketing: a caller's bulk header replaces the default once, in any letter case", () => {
    const { headers } = messageHeaders(
      { precedence: 'list', 'AUTO-SUBMITTED': 'no' },
      { ...marketing, unsubscribeUrl: URL, bodyLinksUnsubscribe: true },
    );
    expect(names(headers).filter((n) => n === 'precedence')).toHaveLength(1);
    expect(headers).toContainEqual(['precedence', 'list']);
    expect(headers).toContainEqual(['AUTO-SUBMITTED', 'no']);
    expect(headers).toContainEqual(['X-Auto-Response-Suppress', 'All']);
  });

  test("transactional: the caller's pair verbatim, else ours only when the body links to the unsubscribe URL", () => {
    const own = messageHeaders(
      { 'list-unsubscribe': '<mailto:u@a.test>', 'list-unsubscribe-post': 'List-Unsubscribe=One-Click' },
      { ...transactional, unsubscribeUrl: URL, bodyLinksUnsubscribe: true },
    );
    expect(own.headers).toEqual([
      ['list-unsubscribe', '<mailto:u@a.test>'],
      ['list-unsubscribe-post', 'List-Unsubscribe=One-Click'],
    ]);
    expect(messageHeaders({}, { ...transactional, unsubscribeUrl: URL, bodyLinksUnsubscribe: true }).headers).toEqual([
      ['List-Unsubscribe', `<${URL}>`],
      ['List-Unsubscribe-Post', 'List-Unsubscribe=One-Click'],
    ]);
    expect(
      messageHeaders({ 'X-A': '1' }, { ...transactional, unsubscribeUrl: URL, bodyLinksUnsubscribe: false }).headers,
    ).toEqual([['X-A', '1']]);
    // No bulk headers on transactional mail.
    expect(
      names(messageHeaders({}, { ...transactional, unsubscribeUrl: URL, bodyLinksUnsubscribe: true }).headers),
    ).not.toContain('precedence');
  });
});
