import { chooseWinner, conversionRate, erfc, normalCdf, twoProportionZTest } from './ab-stats';

describe('normal distribution', () => {
  test('Φ and erfc at known points', () => {
    expect(normalCdf(0)).toBeCloseTo(0.5, 7);
    expect(normalCdf(1)).toBeCloseTo(0.8413447460685429, 6);
    expect(normalCdf(1.96)).toBeCloseTo(0.9750021048517795, 6);
    expect(normalCdf(-1.96)).toBeCloseTo(1 - 0.9750021048517795, 6);
    expect(erfc(0)).toBeCloseTo(1, 7);
    expect(erfc(-1)).toBeCloseTo(2 - erfc(1), 9);
    expect(erfc(3)).toBeCloseTo(2.209049699858544e-5, 9);
  });
});

describe('two-proportion z-test', () => {
  test.each([
    // conversions/sent of a and b → z and two-sided p (reference: math.erfc in Python on the pooled formula)
    [200, 1000, 150, 1000, 2.9424494316825, 0.0032562696284120633],
    [52, 100, 48, 100, 0.5656854249492386, 0.5716076449533312],
    [30, 250, 18, 250, 1.8216981283397258, 0.06850080211952307],
  ])('%i/%i against %i/%i', (x1, n1, x2, n2, z, p) => {
    const t = twoProportionZTest({ conversions: x1, sent: n1 }, { conversions: x2, sent: n2 })!;
    expect(t.z).toBeCloseTo(z, 6);
    expect(t.pValue).toBeCloseTo(p, 6);
    const reversed = twoProportionZTest({ conversions: x2, sent: n2 }, { conversions: x1, sent: n1 })!;
    expect(reversed.z).toBeCloseTo(-z, 6);
    expect(reversed.pValue).toBeCloseTo(p, 6);
  });

  test('undefined without sends or without variance', () => {
    expect(twoProportionZTest({ conversions: 0, sent: 0 }, { conversions: 1, sent: 10 })).toBeNull();
    expect(twoProportionZTest({ conversions: 0, sent: 10 }, { conversions: 0, sent: 10 })).toBeNull();
    expect(twoProportionZTest({ conversions: 10, sent: 10 }, { conversions: 5, sent: 5 })).toBeNull();
    expect(twoProportionZTest({ conversions: 3, sent: 10 }, { conversions: 3, sent: 10 })).toMatchObject({
      z: 0,
      pValue: 1,
    });
  });

  test('rate is conversions per email sent, 0 before any is sent', () => {
    expect(conversionRate({ conversions: 3, sent: 12 })).toBe(0.25);
    expect(conversionRate({ conversions: 0, sent: 0 })).toBe(0);
  });
});

describe('choosing the winner', () => {
  test('the highest rate wins; a significant difference carries no note', () => {
    const c = chooseWinner([
      { variant: 0, sent: 1000, conversions: 150 },
      { variant: 1, sent: 1000, conversions: 200 },
      { variant: 2, sent: 1000, conversions: 90 },
    ]);
    expect(c.winner).toBe(1);
    expect(c.variants.map((v) => v.rate)).toEqual([0.15, 0.2, 0.09]);
    // Tested against the runner-up (variant 0), not the last.
    expect(c.test!.pValue).toBeCloseTo(0.0032562696284120633, 6);
    expect(c.withinNoise).toBe(false);
    expect(c.note).toBeNull();
  });

  test('within noise: still the higher rate, with a note', () => {
    const c = chooseWinner([
      { variant: 0, sent: 100, conversions: 48 },
      { variant: 1, sent: 100, conversions: 52 },
    ]);
    expect(c.winner).toBe(1);
    expect(c.withinNoise).toBe(true);
    expect(c.note).toContain('within noise');
    expect(c.note).toContain('0.572');
  });

  test('a tie goes to the first variant, in whatever order the figures come', () => {
    expect(
      chooseWinner([
        { variant: 2, sent: 50, conversions: 5 },
        { variant: 1, sent: 100, conversions: 10 },
        { variant: 0, sent: 10, conversions: 0 },
      ]).winner,
    ).toBe(1);
    const none = chooseWinner([
      { variant: 1, sent: 0, conversions: 0 },
      { variant: 0, sent: 0, conversions: 0 },
    ]);
    expect(none.winner).toBe(0);
    expect(none.test).toBeNull();
    expect(none.withinNoise).toBe(true);
    expect(none.note).toContain('Not enough data');
  });

  test('no variants is an error', () => {
    expect(() => chooseWinner([])).toThrow();
  });
});
