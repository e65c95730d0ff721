import { Type } from '@sinclair/typebox';
import { AppError } from './errors';
import { addressString, bodyValidator, dataValidator, MailboxString, paramValidator, TRIM_KEYWORD } from './validation';
import { emailDomain, emailKey, formatMailbox, normalizeEmail, parseMailbox, senderFromMailbox } from './address';

const Mailbox = Type.Object(
  { name: Type.Optional(Type.String()), email: Type.String({ format: 'email' }) },
  { additionalProperties: false },
);
const Address = Type.Union([Type.String({ format: 'email' }), Mailbox], {
  description: 'an address or { name, email }',
});
const Body = Type.Object(
  {
    to: Type.Union([Address, Type.Array(Address, { minItems: 1 })], { description: 'an address or a list' }),
    n: Type.Optional(Type.Integer({ maximum: 5 })),
  },
  { additionalProperties: false },
);

function errorsOf(fn: () => unknown) {
  try {
    fn();
  } catch (err) {
    return { status: (err as AppError).statusCode, errors: (err as AppError).options.errors };
  }
  throw new Error('expected a failure');
}

describe('ajv errors become the spec errors[]', () => {
  const v = bodyValidator(Body);
  test('valid input passes through', () => {
    expect(v({ to: ['a@b.test', { email: 'c@d.test' }] })).toEqual({ to: ['a@b.test', { email: 'c@d.test' }] });
  });
  test('union branches are resolved to the one whose type matches', () => {
    expect(errorsOf(() => v({ to: { email: 'bad' } }))).toEqual({
      status: 422,
      errors: [{ field: 'to.email', message: 'must be a valid email', code: 'invalid_string' }],
    });
    expect(errorsOf(() => v({ to: ['a@b.test', { name: 1, email: 'c@d.test' }] })).errors).toEqual([
      { field: 'to.1.name', message: 'must be string', code: 'invalid_type' },
    ]);
    expect(errorsOf(() => v({ to: 5 })).errors).toEqual([
      { field: 'to', message: 'must be an address or a list', code: 'invalid_type' },
    ]);
  });
  test('missing, unknown and out-of-range fields', () => {
    expect(errorsOf(() => v({})).errors).toEqual([{ field: 'to', message: 'is required', code: 'invalid_type' }]);
    expect(errorsOf(() => v({ to: 'a@b.test', x: 1 })).errors).toEqual([
      { field: 'x', message: 'is not a recognized field', code: 'unrecognized_keys' },
    ]);
    expect(errorsOf(() => v({ to: 'a@b.test', n: 9 })).errors![0]).toMatchObject({ field: 'n', code: 'too_big' });
    expect(errorsOf(() => v({ to: [] })).errors![0]).toMatchObject({ field: 'to', code: 'too_small' });
  });
  test('parameters are coerced, defaulted, and fail as 400', () => {
    const q = paramValidator(
      Type.Object({
        limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
        on: Type.Optional(Type.Boolean()),
      }),
    );
    expect(q({ on: 'true' })).toEqual({ limit: 20, on: true });
    expect(q({ limit: '7' })).toEqual({ limit: 7 });
    expect(errorsOf(() => q({ limit: '0' }))).toMatchObject({
      status: 400,
      errors: [{ field: 'limit', code: 'too_small' }],
    });
  });
  test('data validators return errors instead of throwing', () => {
    const d = dataValidator(Type.Object({ id: Type.String({ format: 'uuid' }) }));
    expect(d({ id: 'x' })).toEqual({
      ok: false,
      errors: [{ field: 'id', message: 'must be a valid uuid', code: 'invalid_string' }],
    });
  });
});

describe('hostile input is refused before the schema', () => {
  const v = bodyValidator(
    Type.Object(
      { data: Type.Optional(Type.Record(Type.String(), Type.Unknown())), name: Type.Optional(Type.String()) },
      { additionalProperties: false },
    ),
  );
  test('U+0000 in a value or a key names the field', () => {
    expect(errorsOf(() => v({ name: 'a\u0000' }))).toEqual({
      status: 422,
      errors: [{ field: 'name', message: expect.stringMatching(/NUL/), code: 'invalid_string' }],
    });
    expect(errorsOf(() => v({ data: { 'k\u0000': 1 } })).errors![0].field).toBe('data.k\\u0000');
  });
  test('nesting deeper than 32 levels is refused without recursion', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(errorsOf(() => v({ data: { x: deep } })).errors![0]).toMatchObject({
      field: expect.stringMatching(/^data\.x(\.0)+$/),
      code: 'too_big',
    });
  });
  test('parameters: NUL is 400, numbers must be plain decimal text', () => {
    const q = paramValidator(
      Type.Object({
        limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
        search: Type.Optional(Type.String()),
      }),
    );
    expect(errorsOf(() => q({ search: 'a\u0000' }))).toMatchObject({
      status: 400,
      errors: [{ field: 'search', code: 'invalid_string' }],
    });
    for (const bad of ['1e2', '0x10', ' 5', '5 ', '5.0', '+5', '', 'Infinity']) {
      expect(errorsOf(() => q({ limit: bad }))).toMatchObject({
        status: 400,
        errors: [{ field: 'limit', code: 'invalid_type' }],
      });
    }
    expect(q({ limit: '007' })).toEqual({ limit: 7 });
    expect(errorsOf(() => q({ limit: '-5' })).errors![0]).toMatchObject({ field: 'limit', code: 'too_small' });
  });
  test('format email applies the RFC 5321 size limits', () => {
    const e = bodyValidator(Type.Object({ email: Type.String({ format: 'email' }) }));
    expect(e({ email: `${'a'.repeat(64)}@b.test` })).toBeTruthy();
    expect(errorsOf(() => e({ email: `${'a'.repeat(65)}@b.test` })).errors).toEqual([
      { field: 'email', message: 'local part must be at most 64 characters (RFC 5321)', code: 'too_big' },
    ]);
    expect(errorsOf(() => e({ email: `a@${'b'.repeat(64)}.test` })).errors![0].message).toMatch(
      /labels must be at most 63/,
    );
    expect(
      errorsOf(() => e({ email: `a@${Array.from({ length: 5 }, () => 'b'.repeat(60)).join('.')}` })).errors![0].message,
    ).toMatch(/at most 25[34]/);
    expect(errorsOf(() => e({ email: 'not an address' })).errors![0].message).toBe('must be a valid email');
  });
});

describe('internationalised addresses', () => {
  const e = bodyValidator(Type.Object({ email: Type.String({ format: 'email' }) }));
  test('an IDN domain is accepted, measured and normalised in punycode', () => {
    expect(e({ email: 'user@bücher.de' })).toEqual({ email: 'user@bücher.de' });
    expect(normalizeEmail(' User@Bücher.DE ')).toBe('User@xn--bcher-kva.de');
    expect(emailKey('User@BÜCHER.de')).toBe('user@xn--bcher-kva.de');
    expect(emailDomain('a@bücher.de')).toBe('xn--bcher-kva.de');
    // 60 × "ü" is 120 UTF-8 octets but a 64-character label in punycode: too long as it travels.
    expect(errorsOf(() => e({ email: `a@${'ü'.repeat(60)}.de` })).errors![0].message).toMatch(
      /labels must be at most 63/,
    );
    expect(errorsOf(() => e({ email: 'a@bü..de' })).errors![0]).toMatchObject({
      message: 'must be a valid email',
      code: 'invalid_string',
    });
  });
  test('a non-ASCII local part is refused, saying why', () => {
    expect(errorsOf(() => e({ email: 'jürgen@example.de' })).errors).toEqual([
      {
        field: 'email',
        message: expect.stringMatching(
          /^must have only ASCII characters before the @: Amazon SES does not support SMTPUTF8 \(RFC 6531\)/,
        ),
        code: 'invalid_string',
      },
    ]);
  });
});

describe('mailbox strings', () => {
  const m = bodyValidator(Type.Object({ from: MailboxString }));
  test.each([
    ['hello@acme.test', { email: 'hello@acme.test' }],
    ['Acme <hello@ACME.test>', { email: 'hello@acme.test', name: 'Acme' }],
    ['"Acme, Inc." <hello@acme.test>', { email: 'hello@acme.test', name: 'Acme, Inc.' }],
    ['<hello@acme.test>', { email: 'hello@acme.test' }],
    ['  Jürgen Müller <post@bücher.de>  ', { email: 'post@xn--bcher-kva.de', name: 'Jürgen Müller' }],
  ])('%s is accepted and parsed', (from, mailbox) => {
    expect(m({ from })).toEqual({ from: from.trim() }); // accepted, and trimmed once at validation (x-trim)
    expect(parseMailbox(from)).toEqual({ ok: true, mailbox });
  });
  test.each([
    ['Acme <hello>', /mailbox such as "Acme <hello@acme.com>"/, 'invalid_string'],
    ['Acme <a@b.test>, Other <c@d.test>', /mailbox such as/, 'invalid_string'],
    ['Acme <a@b.test', /mailbox such as/, 'invalid_string'],
    ['Jürgen <jürgen@bücher.de>', /only ASCII characters before the @/, 'invalid_string'],
    [`Acme <${'a'.repeat(65)}@b.test>`, /local part must be at most 64/, 'too_big'],
  ])('%s is refused on its field', (from, message, code) => {
    expect(errorsOf(() => m({ from })).errors).toEqual([
      { field: 'from', message: expect.stringMatching(message), code },
    ]);
  });
  test('a string too long to be a mailbox is refused without being parsed', () => {
    const errors = errorsOf(() => m({ from: `${'<'.repeat(200_000)}a@b.test>` })).errors!;
    expect(errors.every((x) => x.field === 'from' && x.code === 'too_big')).toBe(true);
  });
  test('formatMailbox quotes what needs quoting; senderFromMailbox lets an explicit name win', () => {
    expect(formatMailbox({ email: 'a@b.test' })).toBe('a@b.test');
    expect(formatMailbox({ email: 'a@b.test', name: 'Acme' })).toBe('Acme <a@b.test>');
    expect(formatMailbox({ email: 'a@b.test', name: 'Acme, "Inc"' })).toBe('"Acme, \\"Inc\\"" <a@b.test>');
    expect(parseMailbox(formatMailbox({ email: 'a@b.test', name: 'Acme, "Inc"' }))).toEqual({
      ok: true,
      mailbox: { email: 'a@b.test', name: 'Acme, "Inc"' },
    });
    expect(senderFromMailbox('Acme <a@b.test>')).toEqual({ email: 'a@b.test', name: 'Acme' });
    expect(senderFromMailbox('Acme <a@b.test>', 'Billing')).toEqual({ email: 'a@b.test', name: 'Billing' });
    expect(senderFromMailbox('Acme <a@b.test>', null)).toEqual({ email: 'a@b.test', name: null });
    expect(senderFromMailbox('a@b.test')).toEqual({ email: 'a@b.test', name: undefined });
  });
});

describe('address fields trim surrounding whitespace once, at validation (x-trim)', () => {
  const v = bodyValidator(
    Type.Object({
      email: addressString('email'),
      from: MailboxString,
      to: Type.Array(Type.Union([addressString('email'), Type.Object({ email: addressString('email') })])),
      plain: Type.Optional(Type.String()),
    }),
  );
  test('the value after validation is trimmed, in objects, arrays and union branches; other strings are left as given', () => {
    expect(
      v({
        email: ' \tAnn@Example.COM \n',
        from: '  Acme <hello@acme.test>  ',
        to: [' a@b.test ', { email: ' c@d.test' }],
        plain: ' x ',
      }),
    ).toEqual({
      email: 'Ann@Example.COM',
      from: 'Acme <hello@acme.test>',
      to: ['a@b.test', { email: 'c@d.test' }],
      plain: ' x ',
    });
  });
  test('whitespace inside an address is still refused, with the reason of the trimmed value', () => {
    expect(errorsOf(() => v({ email: ' ann smith@example.com ', from: 'a@b.test', to: [] })).errors).toEqual([
      { field: 'email', message: 'must be a valid email', code: 'invalid_string' },
    ]);
    expect(
      errorsOf(() => v({ email: ` ${'a'.repeat(65)}@b.test `, from: 'a@b.test', to: [] })).errors![0],
    ).toMatchObject({ field: 'email', code: 'too_big' });
  });
  test('the keyword is an OpenAPI extension on the schema', () => {
    expect(addressString('email')).toMatchObject({ type: 'string', format: 'email', [TRIM_KEYWORD]: true });
    expect(TRIM_KEYWORD.startsWith('x-')).toBe(true);
  });
});
