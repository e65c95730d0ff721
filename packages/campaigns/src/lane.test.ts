/** The campaign lane's depth and each campaign's share of it. */
import { campaignLaneDepth, campaignWindow, MIN_LANE_DEPTH } from './lane';

const config = { campaignLaneSeconds: 3, campaignTickMs: 1_000 };

test('depth: seconds of sending at the current rate, at least two ticks, at least the floor', () => {
  expect(campaignLaneDepth(14, config)).toBe(42);
  expect(campaignLaneDepth(100, config)).toBe(300);
  expect(campaignLaneDepth(14, { campaignLaneSeconds: 1, campaignTickMs: 5_000 })).toBe(140);
  expect(campaignLaneDepth(1, config)).toBe(MIN_LANE_DEPTH);
});

test("window: equal between projects, then between a project's campaigns; at least 1, at most CAMPAIGN_QUEUE_WINDOW", () => {
  expect(campaignWindow(42, { projects: 1, campaignsOfProject: 1 }, 5_000)).toBe(42);
  expect(campaignWindow(42, { projects: 2, campaignsOfProject: 1 }, 5_000)).toBe(21);
  expect(campaignWindow(42, { projects: 2, campaignsOfProject: 3 }, 5_000)).toBe(7);
  expect(campaignWindow(42, { projects: 100, campaignsOfProject: 1 }, 5_000)).toBe(1);
  expect(campaignWindow(30_000, { projects: 1, campaignsOfProject: 1 }, 5_000)).toBe(5_000);
  expect(campaignWindow(42, { projects: 0, campaignsOfProject: 0 }, 10)).toBe(10);
});
