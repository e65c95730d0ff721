import { ConfigError } from '@mailroom/platform/config-env';
import { loadAudienceConfig } from '@mailroom/audiences/config';
import { effectiveGuardrails, judgeCampaign, outcomesSince, sesRates, validGuardrailValue } from './guardrails';
import { DEFAULT_GUARDRAILS, type Guardrails } from '@mailroom/audiences/guardrail-defaults';

const g: Guardrails = { minSample: 200, maxHardBounceRate: 0.02, maxComplaintRate: 0.0005 };
const counts = (delivered: number, hardBounces: number, softBounces = 0, complaints = 0) => ({
  delivered,
  hardBounces,
  softBounces,
  complaints,
});

describe('judgeCampaign', () => {
  test('nothing is judged below the minimum sample, however bad the rates', () => {
    expect(judgeCampaign(counts(0, 199), g)).toEqual({ pause: false });
    expect(judgeCampaign(counts(100, 50, 49, 40), g)).toEqual({ pause: false });
    expect(judgeCampaign(counts(0, 0), g)).toEqual({ pause: false });
  });

  test('outcomes are deliveries plus hard and soft bounces; the hard-bounce rate is hard bounces per outcome', () => {
    // 190 delivered + 5 hard + 5 soft = 200 outcomes; 5/200 = 2.5 % > 2 %.
    const v = judgeCampaign(counts(190, 5, 5), g);
    expect(v).toEqual({
      pause: true,
      reason: 'bounce_rate',
      details: {
        hardBounceRate: 0.025,
        complaintRate: 0,
        outcomes: 200,
        hardBounces: 5,
        complaints: 0,
        delivered: 190,
        threshold: 0.02,
        minSample: 200,
      },
    });
  });

  test('a rate equal to its threshold does not pause; one above does', () => {
    expect(judgeCampaign(counts(196, 4), g)).toEqual({ pause: false }); // 4/200 = 2 % exactly
    expect(judgeCampaign(counts(195, 5), g).pause).toBe(true);
    expect(judgeCampaign(counts(2000, 0, 0, 1), g)).toEqual({ pause: false }); // 1/2000 = 0.05 % exactly
    expect(judgeCampaign(counts(2000, 0, 0, 2), g)).toMatchObject({
      pause: true,
      reason: 'complaint_rate',
      details: { complaintRate: 0.001, threshold: 0.0005 },
    });
  });

  test('complaints count per outcome (a complaint follows a delivery, so it adds no outcome)', () => {
    const v = judgeCampaign(counts(1000, 0, 0, 1), { ...g, maxComplaintRate: 0.0009 });
    expect(v).toMatchObject({
      pause: true,
      reason: 'complaint_rate',
      details: { complaintRate: 0.001, outcomes: 1000, complaints: 1 },
    });
  });

  test('both rates over: the reason is complaint_rate', () => {
    expect(judgeCampaign(counts(180, 20, 0, 5), g)).toMatchObject({
      pause: true,
      reason: 'complaint_rate',
      details: { hardBounceRate: 0.1, threshold: 0.0005 },
    });
  });

  test('soft bounces dilute, never trip, the hard-bounce rate', () => {
    expect(judgeCampaign(counts(0, 0, 500), g)).toEqual({ pause: false });
  });

  test('a zero threshold pauses at the first hard bounce once the sample is reached', () => {
    const strict = { minSample: 1, maxHardBounceRate: 0, maxComplaintRate: 0 };
    expect(judgeCampaign(counts(10, 0), strict)).toEqual({ pause: false });
    expect(judgeCampaign(counts(10, 1), strict)).toMatchObject({ pause: true, reason: 'bounce_rate' });
  });
});

describe('effectiveGuardrails', () => {
  test('no overrides: the defaults', () => {
    expect(effectiveGuardrails(g, null)).toEqual(g);
    expect(effectiveGuardrails(g, undefined)).toEqual(g);
    expect(effectiveGuardrails(g, {})).toEqual(g);
  });

  test('each set field overrides its default; null and absent fields keep the default', () => {
    expect(effectiveGuardrails(g, { minSample: 20, maxHardBounceRate: null })).toEqual({
      minSample: 20,
      maxHardBounceRate: 0.02,
      maxComplaintRate: 0.0005,
    });
    expect(effectiveGuardrails(g, { maxHardBounceRate: 0, maxComplaintRate: 1 })).toEqual({
      minSample: 200,
      maxHardBounceRate: 0,
      maxComplaintRate: 1,
    });
  });

  test('an invalid stored value falls back to the default instead of disabling the guardrail', () => {
    const bad = { minSample: 0.5, maxHardBounceRate: -1, maxComplaintRate: 'x' } as unknown as Parameters<
      typeof effectiveGuardrails
    >[1];
    expect(effectiveGuardrails(g, bad)).toEqual(g);
    expect(effectiveGuardrails(g, { maxHardBounceRate: 1.5, minSample: Number.NaN })).toEqual(g);
  });
});

test('validGuardrailValue: integers ≥ 1 for minSample, fractions 0–1 for rates', () => {
  expect(validGuardrailValue('minSample', 1)).toBe(true);
  expect(validGuardrailValue('minSample', 0)).toBe(false);
  expect(validGuardrailValue('minSample', 2.5)).toBe(false);
  expect(validGuardrailValue('maxHardBounceRate', 0)).toBe(true);
  expect(validGuardrailValue('maxHardBounceRate', 1)).toBe(true);
  expect(validGuardrailValue('maxComplaintRate', 1.01)).toBe(false);
  expect(validGuardrailValue('maxComplaintRate', Number.POSITIVE_INFINITY)).toBe(false);
  expect(validGuardrailValue('maxComplaintRate', '0.1')).toBe(false);
});

test('outcomesSince subtracts a baseline and never goes negative', () => {
  expect(
    outcomesSince(counts(300, 30, 2, 1), { delivered: 100, hardBounces: 25, softBounces: 2, complaints: 0 }),
  ).toEqual(counts(200, 5, 0, 1));
  expect(outcomesSince(counts(10, 1), { delivered: 20 })).toEqual(counts(0, 1));
  expect(outcomesSince(counts(10, 1), null)).toEqual(counts(10, 1));
});

test('sesRates: per email sent, null when nothing was sent', () => {
  expect(sesRates({ sent: 1000, hardBounces: 30, complaints: 2 })).toEqual({
    hardBounceRate: 0.03,
    complaintRate: 0.002,
  });
  expect(sesRates({ sent: 0, hardBounces: 3, complaints: 0 })).toEqual({ hardBounceRate: null, complaintRate: null });
});

describe('configuration', () => {
  test('defaults sit well under the SES review levels (5 % bounces, 0.1 % complaints)', () => {
    expect(loadAudienceConfig({}).guardrails).toEqual(DEFAULT_GUARDRAILS);
    expect(DEFAULT_GUARDRAILS.maxHardBounceRate).toBeLessThan(0.05 / 2);
    expect(DEFAULT_GUARDRAILS.maxComplaintRate).toBeLessThanOrEqual(0.001 / 2);
    expect(Object.isFrozen(loadAudienceConfig({}).guardrails)).toBe(true);
  });

  test('GUARDRAIL_* variables set the defaults', () => {
    const c = loadAudienceConfig({
      GUARDRAIL_MIN_SAMPLE: '50',
      GUARDRAIL_MAX_HARD_BOUNCE_RATE: '0.1',
      GUARDRAIL_MAX_COMPLAINT_RATE: '.001',
    });
    expect(c.guardrails).toEqual({ minSample: 50, maxHardBounceRate: 0.1, maxComplaintRate: 0.001 });
    expect(loadAudienceConfig({ GUARDRAIL_MAX_HARD_BOUNCE_RATE: '1' }).guardrails.maxHardBounceRate).toBe(1);
    expect(loadAudienceConfig({ GUARDRAIL_MAX_HARD_BOUNCE_RATE: '0' }).guardrails.maxHardBounceRate).toBe(0);
  });

  test.each([
    [{ GUARDRAIL_MIN_SAMPLE: '0' }, 'GUARDRAIL_MIN_SAMPLE'],
    [{ GUARDRAIL_MIN_SAMPLE: '2.5' }, 'GUARDRAIL_MIN_SAMPLE'],
    [{ GUARDRAIL_MAX_HARD_BOUNCE_RATE: '5%' }, 'GUARDRAIL_MAX_HARD_BOUNCE_RATE'],
    [{ GUARDRAIL_MAX_HARD_BOUNCE_RATE: '1.5' }, 'GUARDRAIL_MAX_HARD_BOUNCE_RATE'],
    [{ GUARDRAIL_MAX_COMPLAINT_RATE: '-0.1' }, 'GUARDRAIL_MAX_COMPLAINT_RATE'],
    [{ GUARDRAIL_MAX_COMPLAINT_RATE: '1e-3' }, 'GUARDRAIL_MAX_COMPLAINT_RATE'],
  ])('%j fails naming %s', (env, variable) => {
    expect(() => loadAudienceConfig(env)).toThrow(ConfigError);
    expect(() => loadAudienceConfig(env)).toThrow(variable);
  });
});
