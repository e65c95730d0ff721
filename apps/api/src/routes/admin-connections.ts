/**
 * Delivery connections, for the operator: `GET /admin/connections` (the configured connections and their health,
 * never their credentials), `PUT /admin/projects/{id}/connection` and `PUT /admin/domains/{domain}/connection`
 * (bind mail to one), and the CLI's `project connection` and `domain connection`
 * (docs/self-hosting/delivery-connections.md).
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import type { Redis } from 'ioredis';
import type { SesConnection } from '@mailroom/mail/connections';
import { connectionHealthKey } from '@mailroom/sending/ses/connection-health';
import { setDomainConnection, setProjectConnection } from '@mailroom/projects/queries/delivery-connections';
import type { DbOrTx } from '@mailroom/db/client';
import { notFound, validationError } from '@mailroom/platform/errors';
import { route } from '../http/route';
import type { AppDeps } from '../http/context';
import { IdParams, Nullable } from './common';

const ConnectionView = Type.Object({
  name: Type.String({ description: 'the connection name (`default`: the single-connection variables)' }),
  region: Type.String(),
  endpoint: Nullable(Type.String({ description: 'endpoint override (the local emulator), else null' })),
  healthy: Type.Boolean({ description: 'false while failed over: its SES kept failing for SES_FAILOVER_WINDOW_MS' }),
  failingSince: Nullable(
    Type.String({ format: 'date-time', description: 'start of the current run of failed SES calls, if any' }),
  ),
});

const BindBody = Type.Object(
  {
    connection: Nullable(
      Type.String({ description: 'a configured connection name; null: unbound (the default rules apply)' }),
    ),
  },
  { additionalProperties: false },
);

const Binding = Type.Object({
  projectId: Type.Optional(Type.String()),
  domain: Type.Optional(Type.String()),
  connection: Nullable(Type.String()),
});

/** The operations shared by the admin routes and the CLI. */
export const connectionOps = {
  /**
   * Binds a project (null: unbinds it).
   * @throws AppError 422 naming `connection` when it is not configured; 404 for an unknown project.
   */
  async bindProject(
    db: DbOrTx,
    connections: readonly SesConnection[],
    projectId: string,
    name: string | null,
  ): Promise<{ projectId: string; connection: string | null }> {
    checkName(connections, name);
    if (!(await setProjectConnection(db, projectId, name))) throw notFound('Project');
    return { projectId, connection: name };
  },
  /**
   * Binds a sending domain (null: unbinds it).
   * @throws AppError 422 naming `connection` when it is not configured; 404 for an unknown domain.
   */
  async bindDomain(
    db: DbOrTx,
    connections: readonly SesConnection[],
    domain: string,
    name: string | null,
  ): Promise<{ domain: string; connection: string | null }> {
    checkName(connections, name);
    const d = domain.trim().toLowerCase();
    if (!(await setDomainConnection(db, d, name))) throw notFound('Domain');
    return { domain: d, connection: name };
  },
  /** The connections and their health as the workers share it in Redis (healthy when Redis cannot say). */
  async list(redis: Redis, prefix: string, connections: readonly SesConnection[]) {
    return Promise.all(
      connections.map(async (c) => {
        const [since, unhealthy] = await redis
          .hmget(connectionHealthKey(prefix, c.name), 'since', 'unhealthy')
          .catch(() => [null, null]);
        return {
          name: c.name,
          region: c.region,
          endpoint: c.endpoint ?? null,
          healthy: unhealthy === null,
          failingSince: since ? new Date(Number(since)).toISOString() : null,
        };
      }),
    );
  },
};

function checkName(connections: readonly SesConnection[], name: string | null): void {
  if (name !== null && !connections.some((c) => c.name === name)) {
    throw validationError([
      {
        field: 'connection',
        message: `must be one of the configured connections (${connections.map((c) => c.name).join(', ')}) or null`,
        code: 'invalid_enum_value',
      },
    ]);
  }
}

/** The routes of this module. */
export function adminConnectionRoutes(deps: AppDeps) {
  const { db } = deps.database;
  const connections = deps.config.sesConnections;
  return [
    route({
      method: 'get',
      path: '/admin/connections',
      operationId: 'adminListConnections',
      tag: 'Admin',
      summary: 'The SES delivery connections and their health',
      auth: 'admin',
      response: Type.Array(ConnectionView),
      status: 200,
      errors: [401, 403, 429],
      handler: async () => ({ data: await connectionOps.list(deps.redis, deps.config.queuePrefix, connections) }),
    }),
    route({
      method: 'put',
      path: '/admin/projects/:id/connection',
      operationId: 'adminBindProjectConnection',
      tag: 'Admin',
      summary: "Bind a project's mail to a delivery connection (its domains without a binding of their own)",
      auth: 'admin',
      params: IdParams,
      body: BindBody,
      response: Binding,
      status: 200,
      errors: [400, 401, 403, 404, 422, 429],
      handler: async ({ params, body, log }) => {
        const r = await connectionOps.bindProject(db, connections, params.id, body.connection);
        log.info(r, 'project bound to a delivery connection');
        return { data: r };
      },
    }),
    route({
      method: 'put',
      path: '/admin/domains/:domain/connection',
      operationId: 'adminBindDomainConnection',
      tag: 'Admin',
      summary: "Bind a sending domain's mail to a delivery connection",
      auth: 'admin',
      params: Type.Object({ domain: Type.String({ minLength: 1, maxLength: 253, description: 'the sending domain' }) }),
      body: BindBody,
      response: Binding,
      status: 200,
      errors: [400, 401, 403, 404, 422, 429],
      handler: async ({ params, body, log }) => {
        const r = await connectionOps.bindDomain(db, connections, params.domain, body.connection);
        log.info(r, 'domain bound to a delivery connection');
        return { data: r };
      },
    }),
  ];
}
