/**
 * Route declarations. One declaration gives the Express handler chain (auth → rate limit → body parsing →
 * validation → handler → envelope) and the OpenAPI operation, from the same TypeBox schemas.
 *
 * Validation (`@mailroom/core` validation) first walks the raw query, path parameters and body once, iteratively,
 * for what no schema expresses: U+0000 anywhere (Postgres `text`/`jsonb` refuse it) and nesting deeper than 32
 * levels (400 `INVALID_PARAMETERS` / 422 `VALIDATION_ERROR` naming the field), and takes numeric parameters only
 * as plain decimal text. So no handler, hash or driver call ever sees a value that would fail in Postgres or
 * exhaust the stack.
 *
 * @module
 */
import express, { type Router } from 'express';
import type { Static, TSchema } from '@sinclair/typebox';
import { AppError, ErrorCode } from '@mailroom/platform/errors';
import { bodyValidator, paramValidator } from '@mailroom/platform/validation';
import { type Logger } from '@mailroom/platform/logger';
import type { Database, DbOrTx } from '@mailroom/db/client';
import type { AuthContext } from './context';
import { runDirect, runIdempotent } from './idempotency';
import type { RouteResult } from './route-result';
import { fromMiddleware, type RequestStep } from './steps';

/** Who may call a route. */
export type RouteAuth = 'secret' | 'any-key' | 'admin' | 'none';

/** What a handler receives. */
export interface RouteContext<B, Q, P> {
  body: B;
  query: Q;
  params: P;
  auth: AuthContext;
  log: Logger;
  requestId: string;
  req: express.Request;
  res: express.Response;
  /**
   * Where the handler writes. On an `idempotent` route called with an `Idempotency-Key`, this is the transaction
   * that holds the key and stores the response, so the effect and its replay record commit together.
   */
  db: DbOrTx;
  /** Registers work to do once the effect is committed (enqueueing jobs); not run when a response is replayed. */
  afterCommit: (fn: () => Promise<void>) => void;
}

/** Re-exported so handlers keep importing the route types from one place. */
export type { RouteResult } from './route-result';

/** A route: transport, schemas (runtime + docs) and the handler. */
export interface RouteDef<
  B extends TSchema | undefined = undefined,
  Q extends TSchema | undefined = undefined,
  P extends TSchema | undefined = undefined,
> {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  /** Express path, e.g. `/templates/:id`. */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  tag: string;
  auth: RouteAuth;
  /** A `secret` route that sends mail (`/v1/send`): send-only keys (`scope: sending`) may call it too. */
  sendingKeys?: boolean;
  body?: B;
  /**
   * The schema the body is validated against at the door, when it is not `body` (which the OpenAPI document then
   * shows): a batch route takes each item's own checks into its handler, so one bad item does not refuse the rest.
   */
  bodyValidation?: TSchema;
  query?: Q;
  params?: P;
  /** Largest accepted body (`bytes` string for body-parser), default `100kb`. */
  bodyLimit?: string;
  /** Schema of `data` in the success envelope. */
  response: TSchema;
  /** Success status; a handler may return another documented one. */
  status: number;
  /** Other documented success statuses with their meaning. */
  otherStatuses?: Record<number, string>;
  /** Error statuses the route can give (documented). */
  errors: number[];
  /**
   * Honours the `Idempotency-Key` header: the first response to a key is replayed for 24 h; the same key with
   * another body is 422 `IDEMPOTENCY_CONFLICT`. The handler must write only through `ctx.db`.
   */
  idempotent?: boolean;
  /** The request body example of the OpenAPI document (default: one synthesized from `body`, required fields only). */
  example?: unknown;
  /** OpenAPI `requestBody` of a route that reads a non-JSON body itself (no `body` schema). */
  requestBody?: Record<string, unknown>;
  // A method, so a route of any schemas is also a route of `TSchema | undefined` ones ({@link AnyRoute}): the router
  // hands each handler only what its own schemas validated.
  handler(ctx: RouteContext<S<B>, S<Q>, S<P>>): Promise<RouteResult>;
}

type S<T> = T extends TSchema ? Static<T> : undefined;

/** Identity function that keeps the schema-derived types of a route declaration. */
export function route<
  B extends TSchema | undefined = undefined,
  Q extends TSchema | undefined = undefined,
  P extends TSchema | undefined = undefined,
>(def: RouteDef<B, Q, P>): RouteDef<B, Q, P> {
  return def;
}

/** A route of whatever schemas, as the router and the OpenAPI generator take them. */
export type AnyRoute = RouteDef<TSchema | undefined, TSchema | undefined, TSchema | undefined>;

/** The steps a route's `auth` maps to (authentication, then the project's rate limit), supplied by the app. */
export interface AuthSteps {
  secret: RequestStep[];
  /** `secret` routes with `sendingKeys`: the same, and send-only keys pass. */
  sending: RequestStep[];
  anyKey: RequestStep[];
  admin: RequestStep[];
}

const JSON_TYPES = ['application/json', 'application/*+json'];

/** The body steps: 400 unless the body is JSON, then body-parser's JSON parser (size-limited: 413 beyond `limit`). */
function jsonBody(limit: string): RequestStep[] {
  const parse = fromMiddleware(express.json({ limit, type: JSON_TYPES, strict: false }));
  const require: RequestStep = (req) => {
    if (!req.is(JSON_TYPES)) {
      throw new AppError(ErrorCode.BAD_REQUEST, 'Content-Type must be application/json', {
        suggestion: 'Send the body as JSON with "Content-Type: application/json".',
      });
    }
  };
  return [require, parse];
}

/**
 * What a handler receives ({@link RouteContext}). `log` is the request's own (`res.locals.log`), read when the
 * handler reads it: a request whose handler logs nothing makes no child logger. A getter of the class, not of each
 * object (see `RequestLocals` in `./request-id`).
 */
class HandlerContext<B, Q, P> implements RouteContext<B, Q, P> {
  constructor(
    readonly body: B,
    readonly query: Q,
    readonly params: P,
    readonly auth: AuthContext,
    readonly requestId: string,
    readonly req: express.Request,
    readonly res: express.Response,
    readonly db: DbOrTx,
    readonly afterCommit: (fn: () => Promise<void>) => void,
  ) {}

  get log(): Logger {
    return (this.res.locals as { log: Logger }).log;
  }
}

/**
 * Mounts the routes on a router: each route is one Express handler that runs its steps (auth, rate limit, JSON
 * body) in order, validates, runs the handler and answers the envelope. A GET answer goes through `res.json`
 * (Express's weak ETag, and 304 to a matching `If-None-Match`); any other method's is written directly, without
 * the ETag (a digest of the body nobody can use on a POST).
 */
export function mountRoutes(router: Router, routes: AnyRoute[], auth: AuthSteps, database: Database): void {
  for (const def of routes) {
    const steps: RequestStep[] = [];
    if (def.auth === 'secret') steps.push(...(def.sendingKeys ? auth.sending : auth.secret));
    if (def.auth === 'any-key') steps.push(...auth.anyKey);
    if (def.auth === 'admin') steps.push(...auth.admin);
    if (def.body) steps.push(...jsonBody(def.bodyLimit ?? '100kb'));
    const validateBody = def.body ? bodyValidator(def.bodyValidation ?? def.body) : undefined;
    const validateQuery = def.query ? paramValidator(def.query) : undefined;
    const validateParams = def.params ? paramValidator(def.params) : undefined;
    router[def.method](def.path, async (req, res) => {
      for (const step of steps) await step(req, res);
      const query: unknown = validateQuery ? validateQuery({ ...req.query }) : undefined;
      const params: unknown = validateParams ? validateParams({ ...req.params }) : undefined;
      const body: unknown = validateBody ? validateBody(req.body) : undefined;
      const locals = res.locals;
      const run = (db: DbOrTx, afterCommit: (fn: () => Promise<void>) => void) =>
        def.handler(new HandlerContext(body, query, params, locals.auth!, locals.requestId, req, res, db, afterCommit));
      const out = def.idempotent
        ? await runIdempotent(database, req, locals.auth!, body, run, def.status)
        : await runDirect(database, run, def.status);
      if (out.replayed) res.set('Idempotent-Replayed', 'true');
      const envelope = { success: true, data: out.data };
      if (req.method === 'GET') {
        res.status(out.status).json(envelope);
      } else {
        res.status(out.status).setHeader('Content-Type', 'application/json; charset=utf-8');
        res.end(JSON.stringify(envelope));
      }
    });
  }
}
