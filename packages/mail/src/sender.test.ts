import { domainCovers } from '@mailroom/platform/address';
import { senderDomainCandidates, senderRefusal } from './sender';

describe('senderDomainCandidates', () => {
  test('the domain and each parent, lower-case', () => {
    expect(senderDomainCandidates('X@A.b.Example.com')).toEqual([
      'a.b.example.com',
      'b.example.com',
      'example.com',
      'com',
    ]);
    expect(senderDomainCandidates('x@localhost')).toEqual(['localhost']);
  });

  test('a verified domain covers the sender exactly when it is a candidate (domainCovers)', () => {
    const verified = [
      'example.com',
      'Example.COM',
      'b.example.com',
      'ample.com',
      'xample.com',
      'a.b.example.com',
      'other.org',
      'com',
    ];
    for (const from of ['x@a.b.example.com', 'x@EXAMPLE.com', 'x@notexample.com', 'x@other.org.evil.test']) {
      const d = from.slice(from.indexOf('@') + 1);
      for (const v of verified) expect(senderDomainCandidates(from).includes(v.toLowerCase())).toBe(domainCovers(v, d));
    }
  });

  test('senderRefusal names the domain', () => {
    expect(senderRefusal('x@Nope.test')).toEqual({
      field: 'from',
      message: 'the domain nope.test is not a verified sending domain of this project',
      code: 'custom',
    });
  });
});
