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
import express, { type RequestHandler, type Router } from 'express';
import type { Static, TSchema } from '@sinclair/typebox';
import { AppError, ErrorCode } from '@mailroom/platform/errors';
import { bodyValidator, paramValidator } from '@mailroom/platform/validation';
import { type Logger } from '@mailroom/platform/logger';
import type { Database, DbOrTx } from '@mailroom/db/client';
import type { AuthContext } from './context';
import { runDirect, runIdempotent } from './idempotency';
import type { RouteResult } from './route-result';

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
export interface RouteDef<B extends TSchema | undefined = undefined, Q extends TSchema | undefined = undefined, P extends TSchema | undefined = undefined> {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  /** Express path, e.g. `/templates/:id`. */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  tag: string;
  auth: RouteAuth;
  body?: B;
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
  /** OpenAPI `requestBody` of a route that reads a non-JSON body itself (no `body` schema). */
  requestBody?: Record<string, unknown>;
  handler: (ctx: RouteContext<S<B>, S<Q>, S<P>>) => Promise<RouteResult>;
}

type S<T> = T extends TSchema ? Static<T> : undefined;

/** Identity function that keeps the schema-derived types of a route declaration. */
export function route<B extends TSchema | undefined = undefined, Q extends TSchema | undefined = undefined, P extends TSchema | undefined = undefined>(
  def: RouteDef<B, Q, P>,
): RouteDef<B, Q, P> {
  return def;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyRoute = RouteDef<any, any, any>;

/** Middleware a route's `auth` maps to, supplied by the app. */
export interface AuthMiddleware {
  secret: RequestHandler[];
  anyKey: RequestHandler[];
  admin: RequestHandler[];
}

function jsonBody(limit: string): RequestHandler[] {
  const parse = express.json({ limit, type: ['application/json', 'application/*+json'], strict: false });
  const require: RequestHandler = (req, _res, next) => {
    if (!req.is(['application/json', 'application/*+json'])) {
      throw new AppError(ErrorCode.BAD_REQUEST, 'Content-Type must be application/json', {
        suggestion: 'Send the body as JSON with "Content-Type: application/json".',
      });
    }
    next();
  };
  return [require, parse];
}

/** Mounts the routes on a router. */
export function mountRoutes(router: Router, routes: AnyRoute[], auth: AuthMiddleware, database: Database): void {
  for (const def of routes) {
    const chain: RequestHandler[] = [];
    if (def.auth === 'secret') chain.push(...auth.secret);
    if (def.auth === 'any-key') chain.push(...auth.anyKey);
    if (def.auth === 'admin') chain.push(...auth.admin);
    if (def.body) chain.push(...jsonBody(def.bodyLimit ?? '100kb'));
    const validateBody = def.body ? bodyValidator(def.body) : undefined;
    const validateQuery = def.query ? paramValidator(def.query) : undefined;
    const validateParams = def.params ? paramValidator(def.params) : undefined;
    chain.push(async (req, res) => {
      const query: unknown = validateQuery ? validateQuery({ ...req.query }) : undefined;
      const params: unknown = validateParams ? validateParams({ ...req.params }) : undefined;
      const body: unknown = validateBody ? validateBody(req.body) : undefined;
      // Express types `res.locals` as `any`; these are set by the auth and request-id middleware.
      const locals = res.locals as { auth?: AuthContext; log: Logger; requestId: string };
      const run = (db: DbOrTx, afterCommit: (fn: () => Promise<void>) => void) =>
        def.handler({ body, query, params, auth: locals.auth!, log: locals.log, requestId: locals.requestId, req, res, db, afterCommit });
      const out = def.idempotent
        ? await runIdempotent(database, req, locals.auth!, body, run, def.status)
        : await runDirect(database, run, def.status);
      if (out.replayed) res.set('Idempotent-Replayed', 'true');
      res.status(out.status).json({ success: true, data: out.data });
    });
    router[def.method](def.path, ...chain);
  }
}
