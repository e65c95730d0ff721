/**
 * Requests and responses born with the Express app's prototypes.
 *
 * Express 5 gives every request and response its app's prototype (`Object.setPrototypeOf(req, app.request)`, and
 * the same for `res`) before routing. In V8 that change of prototype on a live object costs far more than the call:
 * measured on Node 20 under 50 concurrent connections, about a quarter of all the bytes the API allocates then
 * survives the young-generation collections and is promoted, most of every request's objects, against under 2% for
 * the same handler on plain `node:http`; each scavenge pauses 4–7 ms instead of about 1 ms, and the old generation
 * fills every few seconds. The handler behind Express with the prototypes already right at birth promotes nothing
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

/** The `IncomingMessage` and `ServerResponse` options of `http.createServer` for `app`, as described above. */
export function expressServerOptions(app: Express): ServerOptions {
  // Node's constructors are plain functions (not classes), so they run on an object made here with the right
  // prototype. `Reflect.construct(http.IncomingMessage, [socket], Request)` would also take a class, but measured
  // slower, and it still promoted a third as much: V8 derives the object's map from the new target on each call.
  function Request(this: http.IncomingMessage, socket: Socket): void {
    http.IncomingMessage.call(this, socket);
  }
  Request.prototype = app.request;
  const ServerResponse = http.ServerResponse as unknown as (this: unknown, ...args: unknown[]) => void;
  function Response(this: http.ServerResponse, req: http.IncomingMessage, options?: unknown): void {
    ServerResponse.call(this, req, options);
  }
  Response.prototype = app.response;
  return {
    IncomingMessage: Request as unknown as typeof http.IncomingMessage,
    ServerResponse: Response as unknown as typeof http.ServerResponse,
  };
}
