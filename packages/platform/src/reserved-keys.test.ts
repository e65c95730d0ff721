/**
 * Reserved keys (`__proto__`, `constructor`, `prototype`) without services: found as own keys at any depth, and
 * as the prototype a key-assigning parser leaves behind; the request-body validator refuses them with 422.
 */
import { Type } from '@sinclair/typebox';
import { findReservedKeys, markProtoKey } from './reserved-keys';
import { bodyValidator } from './validation';
import { AppError } from './errors';

const fields = (v: unknown, root = '') => findReservedKeys(v, root).map((e) => e.field);

test('own keys from JSON.parse, at any depth and inside arrays, in document order', () => {
  const v = JSON.parse(
    '{"data":{"__proto__":{"x":1},"ok":1,"n":{"constructor":"c"},"l":[{"prototype":2}]},"__proto__":"top"}',
  );
  expect(fields(v)).toEqual(['data.__proto__', 'data.n.constructor', 'data.l.0.prototype', '__proto__']);
  expect(fields(JSON.parse('{"__proto__":1}'), 'data')).toEqual(['data.__proto__']);
  expect(findReservedKeys(JSON.parse('{"constructor":1}'))[0]).toMatchObject({
    code: 'unrecognized_keys',
    message: expect.stringContaining('"constructor" is a reserved key'),
  });
});

test('ordinary keys, values and look-alikes pass', () => {
  expect(
    fields(JSON.parse('{"data":{"Constructor":1,"proto":2,"__proto":3,"x":"__proto__","l":["constructor"]}}')),
  ).toEqual([]);
  expect(fields(Object.assign(Object.create(null) as object, { a: 1 }))).toEqual([]);
  expect(fields(null)).toEqual([]);
  expect(fields('__proto__')).toEqual([]);
});

test('a prototype set by a key-assigning parser is reported, whatever the value (markProtoKey)', () => {
  const text = '{"email":"a@x.test","data":{"__proto__":"a string","ok":1}}';
  const revived = JSON.parse(text, markProtoKey) as unknown;
  // JSON.parse's reviver defines own keys: reported as an own key.
  expect(fields(revived)).toEqual(['data.__proto__']);
  // What stream-json does: plain assignment of the revived value, so the prototype moves.
  const assigned: Record<string, unknown> = {};
  assigned['__proto__'] = markProtoKey('__proto__', 'a string');
  assigned.ok = 1;
  expect(Object.keys(assigned)).toEqual(['ok']);
  expect(fields({ data: assigned })).toEqual(['data.__proto__']);
  // Without the mark a primitive would leave no trace: what the mark is for.
  const lost: Record<string, unknown> = {};
  lost['__proto__'] = 'a string';
  expect(fields({ data: lost })).toEqual([]);
});

test('at most 20 are listed', () => {
  const many = Object.fromEntries(
    Array.from({ length: 50 }, (_, i) => [`k${i}`, JSON.parse('{"__proto__":1}') as unknown]),
  );
  expect(findReservedKeys(many)).toHaveLength(20);
});

test('bodyValidator refuses them with 422 VALIDATION_ERROR naming each path, before the schema', () => {
  const validate = bodyValidator(
    Type.Object({ data: Type.Record(Type.String(), Type.Unknown()) }, { additionalProperties: false }),
  );
  expect(validate(JSON.parse('{"data":{"a":1}}'))).toEqual({ data: { a: 1 } });
  let thrown: unknown;
  try {
    validate(JSON.parse('{"data":{"__proto__":{"polluted":true},"prototype":1}}'));
  } catch (err) {
    thrown = err;
  }
  expect(thrown).toBeInstanceOf(AppError);
  const err = thrown as AppError;
  expect(err.statusCode).toBe(422);
  expect(err.options.errors?.map((e) => e.field)).toEqual(['data.__proto__', 'data.prototype']);
  expect(({} as Record<string, unknown>).polluted).toBeUndefined();
});
