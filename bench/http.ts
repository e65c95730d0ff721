/**
 * The benches' JSON client of the API: one call, the envelope's `data` back.
 *
 * @module
 */

/**
 * A caller of the API at `base` with `secretKey`: `call(method, path, body?)` sends JSON and resolves to the
 * answer's `data`. @throws `Error("<method> <path>: <status> <body>")` on any non-2xx answer.
 */
export function apiCaller(
  base: string,
  secretKey: string,
): (method: string, path: string, body?: unknown) => Promise<Record<string, unknown>> {
  const headers = { authorization: `Bearer ${secretKey}`, 'content-type': 'application/json' };
  return async (method, path, body) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json = (await res.json()) as { data: Record<string, unknown> };
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
    return json.data;
  };
}
