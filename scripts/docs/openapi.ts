/**
 * docs/openapi.json: the OpenAPI document the API serves at `/openapi.json`, built by the same code from the same
 * route list, without a database, Redis or SES (the routes are built over inert dependencies that throw if used).
 *
 * @module
 */
import { loadConfig } from '@mailroom/config/config';
import type { AppDeps } from '../../apps/api/src/http/context';
import type { AnyRoute } from '../../apps/api/src/http/route';
import { apiRoutes, apiVersion, HAND_DESCRIBED_PATHS } from '../../apps/api/src/api-routes';
import { apiDocument } from '../../apps/api/src/openapi';

/** The server URL of the checked-in document (PUBLIC_URL's default). */
export const DOCUMENTED_SERVER_URL = 'http://localhost:8080';

/** A stand-in for a connection or client: any property is another stand-in; calling one throws. */
function inert(what: string): never {
  const target = function () {} as unknown as object;
  return new Proxy(target, {
    get: (_t, prop) => (prop === 'then' || typeof prop === 'symbol' ? undefined : inert(`${what}.${prop}`)),
    apply: () => {
      throw new Error(`${what}() was called while generating the OpenAPI document: route declarations must not use their dependencies`);
    },
  }) as never;
}

/** The declared routes, built over inert dependencies. */
export function documentedRoutes(): AnyRoute[] {
  const config = loadConfig({ NODE_ENV: 'test', PUBLIC_URL: DOCUMENTED_SERVER_URL });
  const deps: AppDeps = { config, database: inert('database'), redis: inert('redis'), queues: inert('queues'), logger: inert('logger') };
  return apiRoutes(deps, () => undefined);
}

/** The document, as the API serves it with the default PUBLIC_URL. */
export function openApiDocument(): ReturnType<typeof apiDocument> {
  return apiDocument(documentedRoutes(), HAND_DESCRIBED_PATHS, { version: apiVersion(), serverUrl: DOCUMENTED_SERVER_URL });
}

/** docs/openapi.json's text. */
export function openApiJson(): string {
  return JSON.stringify(openApiDocument(), null, 2) + '\n';
}
