/**
 * The audience API's one entry point that reads: an {@link Audience} of any type to its SQL predicate, looking up
 * a `SEGMENT` audience's segment first.
 *
 * @module
 */
import type { SQL } from 'drizzle-orm';
import type { DbOrTx } from '@mailroom/db/client';
import { compileAudience, segmentAudience, type Audience, type AudienceScope } from '../audience';
import { getSegment } from './segments';

/**
 * The predicate over `contacts` (alias `scope.alias`) of an audience of the project.
 *
 * @returns the predicate, or `undefined` when a `SEGMENT` audience's segment does not exist (deleted).
 * @throws {@link AppError} 422 when a DYNAMIC segment's stored filter no longer parses.
 */
export async function audiencePredicate(
  db: DbOrTx,
  projectId: string,
  audience: Audience,
  scope: AudienceScope,
): Promise<SQL | undefined> {
  if (audience.type !== 'SEGMENT') return compileAudience(projectId, audience, scope);
  const segment = await getSegment(db, projectId, audience.segmentId);
  return segment && compileAudience(projectId, segmentAudience(segment), scope);
}
