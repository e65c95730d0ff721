/**
 * A project's open and click tracking, for the operator: `GET/PUT /admin/projects/{id}/tracking` and the CLI's
 * `project tracking` (docs/guides/tracking.md). The mode is Plunk's: `ALL`, `MARKETING_ONLY` or `NONE`; a send's,
 * template's or campaign's own `tracking` overrides it.
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import { TRACKING_MODES, type TrackingMode } from '@mailroom/db/schema';
import { getTrackingMode, setTrackingMode } from '@mailroom/projects/queries/tracking';
import type { DbOrTx } from '@mailroom/db/client';
import { notFound, validationError } from '@mailroom/platform/errors';
import { route } from '../http/route';
import type { AppDeps } from '../http/context';
import { IdParams, StringEnum } from './common';

const Mode = StringEnum(
  TRACKING_MODES,
  'ALL mail tracked, MARKETING_ONLY (campaigns, MARKETING templates and marketing workflow mail), or NONE',
);

const TrackingBody = Type.Object({ trackingMode: Mode }, { additionalProperties: false });
const TrackingView = Type.Object({ projectId: Type.String(), trackingMode: Mode });

/** The operations shared by the admin routes and the CLI. */
export const trackingOps = {
  /** The project's mode. @throws AppError 404 for an unknown project. */
  async get(db: DbOrTx, projectId: string): Promise<{ projectId: string; trackingMode: TrackingMode }> {
    const mode = await getTrackingMode(db, projectId);
    if (!mode) throw notFound('Project');
    return { projectId, trackingMode: mode };
  },
  /**
   * Sets the project's mode; mail accepted before keeps the tracking it was accepted with.
   * @throws AppError 422 naming `trackingMode` when it is not one of the modes; 404 for an unknown project.
   */
  async set(db: DbOrTx, projectId: string, mode: string): Promise<{ projectId: string; trackingMode: TrackingMode }> {
    const valid = TRACKING_MODES.find((m) => m === mode);
    if (!valid)
      throw validationError([
        { field: 'trackingMode', message: `must be one of ${TRACKING_MODES.join(', ')}`, code: 'invalid_enum_value' },
      ]);
    if (!(await setTrackingMode(db, projectId, valid))) throw notFound('Project');
    return { projectId, trackingMode: valid };
  },
};

/** The routes of this module. */
export function adminTrackingRoutes(deps: AppDeps) {
  const { db } = deps.database;
  return [
    route({
      method: 'get',
      path: '/admin/projects/:id/tracking',
      operationId: 'adminGetProjectTracking',
      tag: 'Admin',
      summary: "A project's open and click tracking mode",
      auth: 'admin',
      params: IdParams,
      response: TrackingView,
      status: 200,
      errors: [400, 401, 403, 404, 429],
      handler: async ({ params }) => ({ data: await trackingOps.get(db, params.id) }),
    }),
    route({
      method: 'put',
      path: '/admin/projects/:id/tracking',
      operationId: 'adminSetProjectTracking',
      tag: 'Admin',
      summary: "Set a project's open and click tracking mode",
      description:
        'ALL (the default), MARKETING_ONLY or NONE. Decided per email when it is accepted (a send, template or campaign `tracking` wins): ' +
        'tracked mail goes through the tracked SES configuration set of its stream, untracked mail through the one without open and click ' +
        'tracking (`SES_CONFIGURATION_SET_NO_TRACKING`…). Mail already accepted keeps its choice.',
      auth: 'admin',
      params: IdParams,
      body: TrackingBody,
      response: TrackingView,
      status: 200,
      errors: [400, 401, 403, 404, 422, 429],
      handler: async ({ params, body, log }) => {
        const r = await trackingOps.set(db, params.id, body.trackingMode);
        log.info(r, 'project tracking mode set');
        return { data: r };
      },
    }),
  ];
}
