/**
 * The unsubscribe page's security headers: GET (the confirmation page), POST (the answer page and the one-click
 * JSON answer) and the 404 of an unknown token carry a Content-Security-Policy that allows no script, no remote
 * load, a form only to this server and no framing, plus `nosniff`; the page's inline stylesheet is the one the
 * policy's hash allows.
 */
import request from 'supertest';
import { createHash } from 'node:crypto';
import { eq } from 'drizzle-orm';
import { createUnsubscribeToken } from '@mailroom/mail/unsubscribe';
import { projects } from '@mailroom/db/schema/projects';
import { client, recipient, useApiWithProject } from '../support/harness';

const ctx = useApiWithProject();

async function tokenOfNewEmail(): Promise<string> {
  const sent = await client(ctx.api.app, ctx.p).post('/v1/send', {
    to: recipient('unsp'),
    from: `a@${ctx.p.domain}`,
    subject: 'S',
    body: '<p>B</p>',
  });
  expect(sent.status).toBe(202);
  const [{ key }] = await ctx.api.database.db
    .select({ key: projects.signingKey })
    .from(projects)
    .where(eq(projects.id, ctx.p.id));
  return createUnsubscribeToken(sent.body.data.emails[0].email as string, key);
}

function expectPageHeaders(res: request.Response): Map<string, string> {
  expect(res.headers['x-content-type-options']).toBe('nosniff');
  expect(res.headers['x-frame-options']).toBe('DENY');
  expect(res.headers['referrer-policy']).toBe('no-referrer');
  const csp = new Map<string, string>(
    String(res.headers['content-security-policy'])
      .split(';')
      .map((d) => d.trim())
      .filter(Boolean)
      .map((d) => {
        const [name, ...values] = d.split(/\s+/);
        return [name, values.join(' ')];
      }),
  );
  expect(csp.get('default-src')).toBe("'none'");
  expect(csp.get('form-action')).toBe("'self'");
  expect(csp.get('frame-ancestors')).toBe("'none'");
  expect(csp.get('base-uri')).toBe("'none'");
  expect(csp.has('script-src')).toBe(false);
  expect(csp.get('style-src')).toMatch(/^'sha256-[A-Za-z0-9+/]+=*'$/);
  return csp;
}

/** The CSP hash source of each inline `<style>` of a page. */
function styleHashes(html: string): string[] {
  return [...html.matchAll(/<style>([\s\S]*?)<\/style>/g)].map(
    (m) => `'sha256-${createHash('sha256').update(m[1]).digest('base64')}'`,
  );
}

test('GET: the confirmation page has the headers, no script, and its stylesheet is the one the policy allows', async () => {
  const res = await request(ctx.api.app).get(`/unsubscribe/${await tokenOfNewEmail()}`);
  expect(res.status).toBe(200);
  expect(res.type).toBe('text/html');
  const csp = expectPageHeaders(res);
  expect(res.text).not.toMatch(/<script/i);
  expect(styleHashes(res.text)).toEqual([csp.get('style-src')]);
  // The form posts back here (form-action 'self').
  expect(res.text).toMatch(/<form method="post">/);
});

test('POST: the answer page and the one-click JSON answer have the headers', async () => {
  const token = await tokenOfNewEmail();
  const html = await request(ctx.api.app).post(`/unsubscribe/${token}`).type('form').send({});
  expect(html.status).toBe(200);
  const csp = expectPageHeaders(html);
  expect(styleHashes(html.text)).toEqual([csp.get('style-src')]);
  const json = await request(ctx.api.app)
    .post(`/unsubscribe/${token}`)
    .set('Accept', 'application/json')
    .type('form')
    .send({ 'List-Unsubscribe': 'One-Click' });
  expect(json.status).toBe(200);
  expectPageHeaders(json);
});

test('an unknown token: the 404 answers carry the headers too', async () => {
  expectPageHeaders(
    await request(ctx.api.app)
      .get(`/unsubscribe/${'A'.repeat(43)}`)
      .expect(404),
  );
  expectPageHeaders(
    await request(ctx.api.app)
      .post(`/unsubscribe/${'A'.repeat(43)}`)
      .type('form')
      .send({})
      .expect(404),
  );
});
