/**
 * `addressScrubber`: what is cut out of feedback that arrives for an erased email (no database).
 */
import { addressScrubber, ERASED_TEXT } from './erase';

const scrub = addressScrubber(['Ann.Smith+news@Example.com']);
const X = ERASED_TEXT;

test('the address in any letter case, whole', () => {
  expect(scrub('550 5.1.1 <ANN.SMITH+NEWS@EXAMPLE.COM>: unknown; ann.smith+news@example.com')).toBe(
    `550 5.1.1 <${X}>: unknown; ${X}`,
  );
});

test('percent-encoded once or twice, in either hex case, in part or whole', () => {
  const once = encodeURIComponent('ann.smith+news@example.com');
  expect(scrub(`https://x.test/?e=${once}&f=${once.toLowerCase()}`)).toBe(`https://x.test/?e=${X}&f=${X}`);
  expect(scrub(`https://x.test/?next=${encodeURIComponent(`https://y.test/?e=${once}`)}`)).toBe(
    `https://x.test/?next=https%3A%2F%2Fy.test%2F%3Fe%3D${X}`,
  );
  expect(scrub('u=ann.smith+news%40example.com')).toBe(`u=${X}`);
});

test('the local part where it stands quoted on its own; not where it is part of other text', () => {
  expect(scrub('mailbox "ann.smith+news" full; <Ann.Smith+News> (ann.smith+news) \'ann.smith+news\'')).toBe(
    `mailbox "${X}" full; <${X}> (${X}) '${X}'`,
  );
  expect(scrub('user ann.smith+news unknown')).toBe('user ann.smith+news unknown');
});

test('every string and key of a JSON value, other values as they were; the input is not changed', () => {
  const input = {
    diagnosticCode: 'to <ann.smith+news@example.com>',
    n: 3,
    list: ['Ann.Smith+news@example.com', true],
    nested: { 'ann.smith+news@example.com': 'ok' },
  };
  const copy = structuredClone(input);
  expect(scrub(input)).toEqual({ diagnosticCode: `to <${X}>`, n: 3, list: [X, true], nested: { [X]: 'ok' } });
  expect(input).toEqual(copy);
});

test('no addresses: the value as it is', () => {
  const value = { a: 'ann@example.com' };
  expect(addressScrubber(['', '  '])(value)).toBe(value);
});
