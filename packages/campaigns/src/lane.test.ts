/** The campaign lane's depth, each campaign's share of it, and the emails one campaign send job carries. */
import { campaignJobSize, campaignLaneDepth, campaignWindow, MIN_LANE_DEPTH } from './lane';

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

test('emails per campaign job: 50 ms of sending at the current rate, one below 40/s, at most CAMPAIGN_JOB_EMAILS', () => {
  expect(campaignJobSize(14, 50)).toBe(1);
  expect(campaignJobSize(39, 50)).toBe(1);
  expect(campaignJobSize(40, 50)).toBe(2);
  expect(campaignJobSize(200, 50)).toBe(10);
  expect(campaignJobSize(10_000, 50)).toBe(50);
  expect(campaignJobSize(10_000, 1)).toBe(1);
  expect(campaignJobSize(0, 50)).toBe(1);
});
