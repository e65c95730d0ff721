/**
 * Tracking events for contacts (`POST /v1/track`, `POST /events/track`): the event name rule, the contact upsert
 * and the event in one statement (`trackEvent`), and the split of `data` between the event and the contact
 * (`{ value, persistent: false }` values stay on the event, see `splitVariables`).
 *
 * @module
 */
import { isUnavailableError, notFound, validationError, type FieldError } from '@mailroom/platform/errors';
import { splitVariables } from '@mailroom/mail/templates';
import { getContact, type TrackInput, type TrackResult } from './queries/contacts';
import { trackEvent, trackEvents, type TrackItem } from './queries/track-batch';
import { Batcher, type BatcherOptions } from '@mailroom/platform/batcher';
import { type DbOrTx } from '@mailroom/db/client';
import { checkEventName } from './contacts';

/** Writes one track: {@link trackEvent}, or a {@link trackBatcher}'s batched form. */
export type TrackWriter = (tx: DbOrTx, projectId: string, input: TrackInput) => Promise<TrackResult>;

/**
 * A {@link TrackWriter} that folds concurrent tracks written straight to `db` into batches
 * (`@mailroom/contacts/queries/track-batch`, `@mailroom/platform/batcher`): at most `maxInFlight` statements run at
 * once and the tracks that arrive meanwhile go together in the next (at most `maxBatch`). A track written in a
 * transaction of its caller (an `Idempotency-Key` request, whose effect commits with its stored answer) is
 * written alone in that transaction. A batch that fails as a whole (two tracks for one contact, a deadlock, one
 * track's data refused) writes nothing, and each of its tracks is then written alone, with its own answer; one
 * that lost its connection (commit unknown) gives every track the error (503) instead of writing any twice.
 *
 * @param options.maxBatch - most tracks in one statement (1 writes every track alone); `observe` is told each
 *   statement's number of tracks.
 */
export function trackBatcher(db: DbOrTx, options: BatcherOptions): TrackWriter {
  if (options.maxBatch <= 1) return trackEvent;
  const batcher = new Batcher<TrackItem, TrackResult>(
    (items) => trackEvents(db, items),
    (item) => trackEvent(db, item.projectId, item.input),
    // A dropped connection leaves the batch's commit unknown: its requests get the error (503), never a second write.
    { ...options, retryAlone: (err) => !isUnavailableError(err) },
  );
  return (tx, projectId, input) => (tx === db ? batcher.run({ projectId, input }) : trackEvent(tx, projectId, input));
}

/** One tracked event: the contact's address, the event name as given, and the request's `data`. */
export interface TrackRequest {
  email: string;
  event: string;
  /** `subscribed` of the contact; a new contact defaults to true, an existing one keeps its value when omitted. */
  subscribed?: boolean;
  data?: Record<string, unknown>;
  /** Tracked with a test key: a test event, which starts and wakes test workflow executions only. */
  test: boolean;
}

/** What tracking recorded: the statement's result, the trimmed name and the event's data. */
export interface TrackedEvent {
  r: TrackResult;
  name: string;
  data: Record<string, unknown>;
}

/**
 * Upserts the contact and records the event, in one statement.
 *
 * @param field - the request field that held the name (named in the error).
 * @throws {@link AppError} 422 when the name is empty, longer than 255 characters or reserved.
 */
export async function trackContactEvent(
  tx: DbOrTx,
  projectId: string,
  input: TrackRequest,
  field: 'event' | 'name' = 'event',
  writer?: TrackWriter,
): Promise<TrackedEvent> {
  const name = checkEventName(input.event);
  if (!name.ok) throw validationError([{ ...name.error, field }]);
  const { render, persist } = splitVariables(input.data);
  const r = await (writer ?? trackEvent)(tx, projectId, {
    email: input.email,
    subscribed: input.subscribed,
    contactData: persist,
    name: name.name,
    eventData: render,
    test: input.test,
  });
  return { r, name: name.name, data: render };
}

/** The field error when not exactly one of `primary` and its Plunk alternative `alias` is given. */
function oneOf(body: Record<string, unknown>, primary: string, alias: string): FieldError | undefined {
  const has = (k: string) => body[k] !== undefined;
  if (!has(primary) && !has(alias))
    return { field: primary, message: `is required (or ${alias})`, code: 'invalid_type' };
  if (has(primary) && has(alias))
    return { field: alias, message: `give ${primary} or ${alias}, not both`, code: 'custom' };
  return undefined;
}

/** `POST /events/track`'s body: ours, or Plunk v2's (`name` for `event`, `contactId` for `email`). */
export interface PlunkTrackRequest {
  email?: string;
  contactId?: string;
  event?: string;
  name?: string;
  subscribed?: boolean;
  data?: Record<string, unknown>;
}

/**
 * Tracks an event given in our form or Plunk v2's: exactly one of `event`/`name` and one of `email`/`contactId`
 * (an existing contact of the project).
 *
 * @throws {@link AppError} 422 (not exactly one of a pair; a bad name, named by the field that held it), 404 (no
 *   such contact).
 */
export async function trackPlunkEvent(
  tx: DbOrTx,
  projectId: string,
  body: PlunkTrackRequest,
  test: boolean,
  writer?: TrackWriter,
): Promise<TrackedEvent> {
  const fields = body as Record<string, unknown>;
  const problems = [oneOf(fields, 'event', 'name'), oneOf(fields, 'email', 'contactId')].filter((p) => p !== undefined);
  if (problems.length) throw validationError(problems);
  let email = body.email;
  if (email === undefined) {
    const contact = await getContact(tx, projectId, body.contactId!);
    if (!contact) throw notFound('Contact');
    email = contact.email;
  }
  const event = (body.event ?? body.name)!;
  const input = { email, event, subscribed: body.subscribed, data: body.data, test };
  return trackContactEvent(tx, projectId, input, body.event === undefined ? 'name' : 'event', writer);
}
