/**
 * Requests and responses born with the Express app's prototypes.
 *
 * Express 5 gives every request and response its app's prototype (`Object.setPrototypeOf(req, app.request)`, and
 * the same for `res`) before routing. In V8 that change of prototype on a live object costs far more than the call:
 * measured on Node 20 under 50 concurrent connections, about a quarter of all the bytes a small Express server
 * allocates then survives the young-generation collections and is promoted, most of every request's objects, against
 * about 1% surviving and nothing promoted for the same handler on plain `node:http`; each scavenge pauses about
 * 4.5 ms instead of under 1.5 ms, and the old generation fills every few seconds. The handler behind Express with
 * the prototypes already right at birth promotes nothing
 * (docs/decisions/0180-requests-born-with-express-prototypes.md).
 *
 * So the server builds its requests and responses with these constructors: Node's own `IncomingMessage` and
 * `ServerResponse` (`http.createServer`'s options of those names), whose instances already have `app.request` and
 * `app.response` as prototypes. Express's call then finds the prototype it would set and changes nothing. A
 * sub-app that Express mounts still swaps prototypes for its own requests (the queue dashboard's), as before.
 *
 * @module
 */
import http, { type ServerOptions } from 'node:http';
import type { Socket } from 'node:net';
import type { Express } from 'express';

/** The Node classes {@link expressServerOptions} builds on (a test passes others). */
export type NodeHttpClasses = Pick<typeof http, 'IncomingMessage' | 'ServerResponse'>;

/**
 * The `IncomingMessage` and `ServerResponse` options of `http.createServer` for `app`, as described above.
 *
 * Node's constructors must be callable as plain functions, as they are in Node 20 and 22. Both are tried once here:
 * if they cannot be (a Node whose constructors are classes), this warns (`process.emitWarning`) and returns no
 * options, and the server builds Node's own objects, which Express then changes as before: slower, never broken.
 */
export function expressServerOptions(app: Express, node: NodeHttpClasses = http): ServerOptions {
  // Node's constructors run on an object made here with the right prototype.
  // `Reflect.construct(http.IncomingMessage, [socket], Request)` would also take a class, but measured slower, and it
  // still promoted a third as much: V8 derives the object's map from the new target on each call.
  const IncomingMessage = node.IncomingMessage as unknown as (this: unknown, ...args: unknown[]) => void;
  const ServerResponse = node.ServerResponse as unknown as (this: unknown, ...args: unknown[]) => void;
  function Request(this: http.IncomingMessage, socket: Socket): void {
    IncomingMessage.call(this, socket);
  }
  Request.prototype = app.request;
  function Response(this: http.ServerResponse, req: http.IncomingMessage, options?: unknown): void {
    ServerResponse.call(this, req, options);
  }
  Response.prototype = app.response;
  const R = Request as unknown as typeof http.IncomingMessage;
  const S = Response as unknown as typeof http.ServerResponse;
  try {
    new S(new R(undefined as unknown as Socket));
  } catch (err) {
    process.emitWarning(
      `Node's http.IncomingMessage and ServerResponse cannot be called as functions (${String(err)}): ` +
        "Express will set each request's prototype (slower)",
    );
    return {};
  }
  return { IncomingMessage: R, ServerResponse: S };
}
