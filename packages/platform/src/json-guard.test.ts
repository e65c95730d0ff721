import { findJsonProblem, MAX_JSON_DEPTH } from './json-guard';

describe('findJsonProblem', () => {
  test('accepts what Postgres stores: text, emoji, numbers, nesting up to the limit', () => {
    let deep: unknown = 'leaf';
    for (let i = 0; i < MAX_JSON_DEPTH; i++) deep = { k: deep };
    // 32 containers, one inside the other, is the most accepted.
    expect(findJsonProblem(deep)).toBeUndefined();
    expect(findJsonProblem({ deep })).toMatchObject({ code: 'too_big' });
    expect(findJsonProblem({ s: 'plain 😀', n: 1e308, b: true, z: null, a: [1, 'two', { three: 3 }] })).toBeUndefined();
  });

  test('names the field of a NUL in a value or a key', () => {
    expect(findJsonProblem({ data: { note: 'a\u0000b' } })).toEqual({
      field: 'data.note',
      message: expect.stringContaining('NUL'),
      code: 'invalid_string',
    });
    expect(findJsonProblem({ k: 'a\u0000' }, 'data')).toMatchObject({ field: 'data.k' });
    expect(findJsonProblem({ data: { 'x\u0000y': 1 } })).toMatchObject({
      field: 'data.x\\u0000y',
      message: expect.stringMatching(/^key /),
    });
    expect(findJsonProblem({ to: ['ok@x.test', 'b\u0000@x.test'] })).toMatchObject({ field: 'to.1' });
    expect(findJsonProblem('\u0000')).toMatchObject({ field: '(root)' });
  });

  test('names the field of a lone surrogate, and lets a surrogate pair through', () => {
    expect(findJsonProblem({ s: 'x\ud800y' })).toMatchObject({
      field: 's',
      message: expect.stringContaining('surrogate'),
    });
    expect(findJsonProblem({ s: '\udc00' })).toMatchObject({ field: 's' });
    expect(findJsonProblem({ ['\ud800']: 1 })).toMatchObject({ field: '\ufffd', code: 'invalid_string' });
    expect(findJsonProblem({ s: '\ud83d\ude00' })).toBeUndefined();
  });

  test('refuses nesting past the limit, iteratively (100,000 levels, no stack overflow)', () => {
    let tooDeep: unknown = 1;
    for (let i = 0; i <= MAX_JSON_DEPTH; i++) tooDeep = [tooDeep];
    expect(findJsonProblem({ data: tooDeep })).toMatchObject({
      code: 'too_big',
      field: expect.stringMatching(/^data(\.0)+$/),
    });
    let huge: unknown = 1;
    for (let i = 0; i < 100_000; i++) huge = { a: huge };
    expect(findJsonProblem(huge, 'data')).toMatchObject({
      code: 'too_big',
      message: expect.stringContaining(`${MAX_JSON_DEPTH} levels`),
    });
  });
});
