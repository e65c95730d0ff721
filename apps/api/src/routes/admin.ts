/**
 * Operator routes under `/admin/*`, guarded by `ADMIN_TOKEN`: the same operations as the CLI.
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import { AppError, ErrorCode, errorCode, notFound, validationError } from '@mailroom/core';
import { addDomain, createProject, emailStatsByProject, rotateKeys, setProjectDisabled, type Db } from '@mailroom/db';
import { route } from '../http/route';
import type { AppDeps } from '../http/context';
import { IdParams, Timestamp } from './common';

const IssuedProject = Type.Object({
  id: Type.String(),
  name: Type.String(),
  disabled: Type.Boolean(),
  publicKey: Type.String({ description: 'pk_…, shown once' }),
  secretKey: Type.String({ description: 'sk_…, shown once' }),
});
const ProjectState = Type.Object({ id: Type.String(), name: Type.String(), disabled: Type.Boolean() });
const Domain = Type.Object({ id: Type.String(), projectId: Type.String(), domain: Type.String(), verified: Type.Boolean(), createdAt: Timestamp });
const DomainName = Type.String({
  minLength: 3,
  maxLength: 253,
  pattern: '^(?=.{3,253}$)([a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?\\.)+[a-zA-Z]{2,63}\\.?$',
  description: 'a domain name, e.g. example.com',
});

/** The operations shared by `/admin/*` and the CLI. */
export const adminOps = {
  createProject: (db: Db, name: string) => createProject(db, name),
  rotateKeys: async (db: Db, projectId: string, graceHours: number) => {
    const p = await rotateKeys(db, projectId, graceHours);
    if (!p) throw notFound('Project');
    return p;
  },
  setDisabled: async (db: Db, projectId: string, disabled: boolean) => {
    const p = await setProjectDisabled(db, projectId, disabled);
    if (!p) throw notFound('Project');
    return p;
  },
  addDomain: async (db: Db, projectId: string, domain: string, verified: boolean) => {
    const r = await addDomain(db, projectId, domain, verified).catch((err: unknown) => {
      if (errorCode(err) === '23503') throw notFound('Project');
      throw err;
    });
    if (!r.ok && r.reason === 'invalid') throw validationError([{ field: 'domain', message: 'must be a domain name such as example.com', code: 'invalid_string' }]);
    if (!r.ok) throw new AppError(ErrorCode.CONFLICT, `The domain ${domain} belongs to another project`);
    return r.domain;
  },
};

/** Routes of this module; `onChange` runs after anything that affects authentication (cache flush). */
export function adminRoutes(deps: AppDeps, onChange: () => void) {
  const { db } = deps.database;
  const { config } = deps;
  return [
    route({
      method: 'get',
      path: '/admin/stats',
      operationId: 'adminStats',
      tag: 'Admin',
      summary: 'Emails per project by status, over the last hour and the last day',
      description: 'Counts emails created in each window, by their current status. Projects without email in the last day are left out.',
      auth: 'admin',
      response: Type.Object({
        generatedAt: Timestamp,
        projects: Type.Array(
          Type.Object({
            projectId: Type.String(),
            projectName: Type.String(),
            lastHour: Type.Record(Type.String(), Type.Integer(), { description: 'status → emails created in the last hour' }),
            lastDay: Type.Record(Type.String(), Type.Integer(), { description: 'status → emails created in the last 24 hours' }),
          }),
        ),
      }),
      status: 200,
      errors: [401, 403],
      handler: async () => ({ data: { generatedAt: new Date().toISOString(), projects: await emailStatsByProject(deps.database.db) } }),
    }),
    route({
      method: 'post',
      path: '/admin/projects',
      operationId: 'adminCreateProject',
      tag: 'Admin',
      summary: 'Create a project with a key pair',
      auth: 'admin',
      body: Type.Object({ name: Type.String({ minLength: 1, maxLength: 200 }) }, { additionalProperties: false }),
      response: IssuedProject,
      status: 201,
      errors: [400, 401, 403, 422],
      handler: async ({ body }) => ({ data: await adminOps.createProject(db, body.name) }),
    }),
    route({
      method: 'post',
      path: '/admin/projects/:id/rotate-keys',
      operationId: 'adminRotateKeys',
      tag: 'Admin',
      summary: 'Issue new keys; the old ones keep working for KEY_ROTATION_GRACE_HOURS',
      auth: 'admin',
      params: IdParams,
      response: IssuedProject,
      status: 200,
      errors: [400, 401, 403, 404],
      handler: async ({ params }) => {
        const p = await adminOps.rotateKeys(db, params.id, config.keyRotationGraceHours);
        onChange();
        return { data: p };
      },
    }),
    ...(['disable', 'enable'] as const).map((action) =>
      route({
        method: 'post',
        path: `/admin/projects/:id/${action}`,
        operationId: action === 'disable' ? 'adminDisableProject' : 'adminEnableProject',
        tag: 'Admin',
        summary: action === 'disable' ? 'Disable a project (API refused, queued mail not sent)' : 'Enable a project',
        auth: 'admin',
        params: IdParams,
        response: ProjectState,
        status: 200,
        errors: [400, 401, 403, 404],
        handler: async ({ params }) => {
          const p = await adminOps.setDisabled(db, params.id, action === 'disable');
          onChange();
          return { data: p };
        },
      }),
    ),
    route({
      method: 'post',
      path: '/admin/projects/:id/domains',
      operationId: 'adminAddDomain',
      tag: 'Admin',
      summary: 'Register a sending domain for a project (optionally already verified)',
      auth: 'admin',
      params: IdParams,
      body: Type.Object({ domain: DomainName, verified: Type.Optional(Type.Boolean()) }, { additionalProperties: false }),
      response: Domain,
      status: 201,
      errors: [400, 401, 403, 404, 409, 422],
      handler: async ({ params, body }) => {
        const d = await adminOps.addDomain(db, params.id, body.domain, body.verified ?? false);
        return { data: { id: d.id, projectId: d.projectId, domain: d.domain, verified: d.verified, createdAt: d.createdAt.toISOString() } };
      },
    }),
  ];
}
