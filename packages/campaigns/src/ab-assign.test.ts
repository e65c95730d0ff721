import { randomUUID } from 'node:crypto';
import { abBucket, assignVariant, testBuckets, variantOfBucket } from './ab-assign';

describe('A/B assignment', () => {
  const campaign = '0190a6b4-8a4e-7000-8000-000000000001';
  const contacts = Array.from({ length: 20_000 }, () => randomUUID());

  test('reproducible: the same campaign and contact give the same bucket and variant, any case', () => {
    expect(abBucket('a', 'b')).toBe(3625323675 % 10_000);
    for (const id of contacts.slice(0, 200)) {
      expect(abBucket(campaign, id)).toBe(abBucket(campaign.toUpperCase(), id.toUpperCase()));
      expect(assignVariant(campaign, id, 30, 3)).toBe(assignVariant(campaign, id, 30, 3));
    }
  });

  test('another campaign draws another group', () => {
    const other = '0190a6b4-8a4e-7000-8000-000000000002';
    const a = contacts.filter((id) => assignVariant(campaign, id, 20, 2) !== null);
    const both = a.filter((id) => assignVariant(other, id, 20, 2) !== null);
    // Independent draws overlap by about 20% of 20%.
    expect(both.length / a.length).toBeGreaterThan(0.15);
    expect(both.length / a.length).toBeLessThan(0.25);
  });

  test.each([
    [20, 2],
    [10, 5],
    [100, 3],
    [1, 2],
  ])('test share %i%% in %i variants: the right share, split evenly', (share, k) => {
    const counts = Array<number>(k).fill(0);
    let rest = 0;
    for (const id of contacts) {
      const v = assignVariant(campaign, id, share, k);
      if (v === null) rest++;
      else counts[v]++;
    }
    const inTest = contacts.length - rest;
    const expected = contacts.length * (share / 100);
    // Binomial: within 5 standard deviations.
    const sd = Math.sqrt(contacts.length * (share / 100) * (1 - share / 100));
    expect(Math.abs(inTest - expected)).toBeLessThanOrEqual(5 * sd + 1);
    for (const n of counts) {
      const sdv = Math.sqrt(inTest * (1 / k) * (1 - 1 / k));
      expect(Math.abs(n - inTest / k)).toBeLessThanOrEqual(5 * sdv + 1);
    }
  });

  test('buckets map onto equal ranges per variant', () => {
    expect(testBuckets(20)).toBe(2000);
    expect(testBuckets(12.5)).toBe(1250);
    const ranges = Array<number>(3).fill(0);
    for (let b = 0; b < 10_000; b++) {
      const v = variantOfBucket(b, 30, 3);
      if (v !== null) ranges[v]++;
    }
    expect(ranges).toEqual([1000, 1000, 1000]);
    expect(variantOfBucket(2999, 30, 3)).toBe(2);
    expect(variantOfBucket(3000, 30, 3)).toBeNull();
    expect(variantOfBucket(9999, 100, 5)).toBe(4);
  });
});
