/**
 * docs/guides/webhooks.md shows an example body for every event type an endpoint can subscribe to, and for no
 * other: the `type` of each JSON example is compared with the catalogue the code validates subscriptions against,
 * and each example is valid JSON shaped as a delivery body (`{type, timestamp, data}`).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { WEBHOOK_EVENT_TYPES } from '@mailroom/webhooks/webhooks';
import { ROOT } from './snippets';

/** The `type` of every ```json block of the page that has one; each block must be valid JSON of the delivery's shape. */
function exampleTypes(): string[] {
  const text = readFileSync(path.join(ROOT, 'docs/guides/webhooks.md'), 'utf8');
  const types: string[] = [];
  for (const m of text.matchAll(/```json\n([\s\S]*?)\n```/g)) {
    const body = JSON.parse(m[1]) as { type?: unknown; timestamp?: unknown; data?: unknown };
    if (typeof body.type !== 'string') continue;
    expect(Object.keys(body).sort()).toEqual(['data', 'timestamp', 'type']);
    types.push(body.type);
  }
  return types;
}

test('every event type has an example body, and every example is of a real event type', () => {
  const shown = new Set(exampleTypes());
  expect([...WEBHOOK_EVENT_TYPES].filter((t) => !shown.has(t))).toEqual([]);
  expect([...shown].filter((t) => !(WEBHOOK_EVENT_TYPES as readonly string[]).includes(t))).toEqual([]);
});
