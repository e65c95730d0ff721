/** The campaign rules that need no database: states, the audience-type switch, test keys, who a campaign reaches. */
import { AppError, ErrorCode } from '@mailroom/platform/errors';
import type { CampaignRow } from './queries/campaigns';
import { campaignAudience, patchedCampaign, refused, refuseTestKeyOnLive, requireEditable } from './rules';

const SEGMENT = '0190a3c1-0000-7000-8000-00000000000a';
const draft = {
  status: 'DRAFT',
  audienceType: 'SEGMENT',
  segmentId: SEGMENT,
  audienceFilter: null,
  test: false,
} as unknown as CampaignRow;

const codeOf = (f: () => unknown) => {
  try {
    f();
  } catch (err) {
    return err instanceof AppError ? err.code : String(err);
  }
  return undefined;
};

test('only DRAFT and SCHEDULED campaigns are edited or sent; refusals are 409, or 404 when missing', () => {
  expect(codeOf(() => requireEditable({ status: 'DRAFT' }, 'send'))).toBeUndefined();
  expect(codeOf(() => requireEditable({ status: 'SCHEDULED' }, 'update'))).toBeUndefined();
  for (const status of ['SENDING', 'PAUSED', 'SENT', 'CANCELLED', 'FAILED'] as const) {
    expect(codeOf(() => requireEditable({ status }, 'send'))).toBe(ErrorCode.INVALID_STATE);
  }
  expect(refused({ ok: false, reason: 'state', status: 'SENT' }, 'send').message).toBe(
    'Cannot send a campaign that is SENT',
  );
  expect(refused({ ok: false, reason: 'missing' }, 'send').code).toBe(ErrorCode.NOT_FOUND);
});

test("switching the audience type drops the other type's settings unless restated", () => {
  expect(patchedCampaign(draft, { audienceType: 'ALL' })).toMatchObject({
    merged: { audienceType: 'ALL', segmentId: null },
    patch: { audienceType: 'ALL', segmentId: null, audienceFilter: null },
  });
  const filter = [{ field: 'subscribed', operator: 'equals', value: true }];
  expect(patchedCampaign(draft, { audienceType: 'FILTERED', audienceFilter: filter }).patch).toEqual({
    audienceType: 'FILTERED',
    audienceFilter: filter,
    segmentId: null,
  });
  expect(patchedCampaign(draft, { audienceType: 'ALL', segmentId: SEGMENT }).merged.segmentId).toBe(SEGMENT);
  expect(patchedCampaign(draft, { name: 'n' }).patch).toEqual({ name: 'n' });
});

test('a test key cannot resume or retry a live campaign', () => {
  expect(codeOf(() => refuseTestKeyOnLive({ mode: 'test' }, { test: false }, 'resume'))).toBe(ErrorCode.FORBIDDEN);
  expect(codeOf(() => refuseTestKeyOnLive({ mode: 'test' }, { test: true }, 'resume'))).toBeUndefined();
  expect(codeOf(() => refuseTestKeyOnLive({ mode: 'live' }, { test: false }, 'resume'))).toBeUndefined();
});

test('who a campaign reaches', () => {
  expect(campaignAudience({ audienceType: 'ALL', segmentId: null, audienceFilter: null })).toEqual({ type: 'ALL' });
  expect(campaignAudience({ audienceType: 'SEGMENT', segmentId: SEGMENT, audienceFilter: null })).toEqual({
    type: 'SEGMENT',
    segmentId: SEGMENT,
  });
  expect(campaignAudience({ audienceType: 'SEGMENT', segmentId: null, audienceFilter: null })).toBeUndefined();
  expect(
    campaignAudience({
      audienceType: 'FILTERED',
      segmentId: null,
      audienceFilter: [{ field: 'subscribed', operator: 'equals', value: true }],
    }),
  ).toEqual({
    type: 'FILTERED',
    filter: { kind: 'group', logic: 'AND', children: [{ kind: 'subscribed', op: 'equals', value: true }] },
  });
});
