import { Type } from '@sinclair/typebox';
import { AppError } from './errors';
import { bodyValidator, dataValidator, paramValidator } from './validation';

const Mailbox = Type.Object({ name: Type.Optional(Type.String()), email: Type.String({ format: 'email' }) }, { additionalProperties: false });
const Address = Type.Union([Type.String({ format: 'email' }), Mailbox], { description: 'an address or { name, email }' });
const Body = Type.Object(
  { to: Type.Union([Address, Type.Array(Address, { minItems: 1 })], { description: 'an address or a list' }), n: Type.Optional(Type.Integer({ maximum: 5 })) },
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
    expect(errorsOf(() => v({ to: { email: 'bad' } }))).toEqual({ status: 422, errors: [{ field: 'to.email', message: 'must be a valid email', code: 'invalid_string' }] });
    expect(errorsOf(() => v({ to: ['a@b.test', { name: 1, email: 'c@d.test' }] })).errors).toEqual([{ field: 'to.1.name', message: 'must be string', code: 'invalid_type' }]);
    expect(errorsOf(() => v({ to: 5 })).errors).toEqual([{ field: 'to', message: 'must be an address or a list', code: 'invalid_type' }]);
  });
  test('missing, unknown and out-of-range fields', () => {
    expect(errorsOf(() => v({})).errors).toEqual([{ field: 'to', message: 'is required', code: 'invalid_type' }]);
    expect(errorsOf(() => v({ to: 'a@b.test', x: 1 })).errors).toEqual([{ field: 'x', message: 'is not a recognized field', code: 'unrecognized_keys' }]);
    expect(errorsOf(() => v({ to: 'a@b.test', n: 9 })).errors![0]).toMatchObject({ field: 'n', code: 'too_big' });
    expect(errorsOf(() => v({ to: [] })).errors![0]).toMatchObject({ field: 'to', code: 'too_small' });
  });
  test('parameters are coerced, defaulted, and fail as 400', () => {
    const q = paramValidator(Type.Object({ limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }), on: Type.Optional(Type.Boolean()) }));
    expect(q({ on: 'true' })).toEqual({ limit: 20, on: true });
    expect(q({ limit: '7' })).toEqual({ limit: 7 });
    expect(errorsOf(() => q({ limit: '0' }))).toMatchObject({ status: 400, errors: [{ field: 'limit', code: 'too_small' }] });
  });
  test('data validators return errors instead of throwing', () => {
    const d = dataValidator(Type.Object({ id: Type.String({ format: 'uuid' }) }));
    expect(d({ id: 'x' })).toEqual({ ok: false, errors: [{ field: 'id', message: 'must be a valid uuid', code: 'invalid_string' }] });
  });
});
