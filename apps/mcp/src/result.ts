/**
 * Tool answers: a call's `data` as JSON text, or a tool error (`isError`) carrying the API's code and message, so
 * the agent reads what went wrong and can correct its arguments instead of the session failing.
 *
 * @module
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { MailroomError, type Envelope } from '@mailroom/client/errors';

/** A successful tool answer: `data` as indented JSON text. */
export function toolResult(data: unknown): CallToolResult {
  return { content: [{ type: 'text', text: JSON.stringify(data, null, 2) }] };
}

/**
 * A tool error: `CODE: message`, then the field errors (`field: message`) and the request id when there are any.
 *
 * @param code - the API's error code (`VALIDATION_ERROR`, `NOT_FOUND`, …) or the tool's own (`CONFIRMATION_REQUIRED`).
 */
export function toolError(
  code: string,
  message: string,
  details: { errors?: { field: string; message: string }[]; requestId?: string } = {},
): CallToolResult {
  const lines = [`${code}: ${message}`, ...(details.errors ?? []).map((e) => `- ${e.field}: ${e.message}`)];
  if (details.requestId) lines.push(`(request id ${details.requestId})`);
  return { isError: true, content: [{ type: 'text', text: lines.join('\n') }] };
}

/** The tool error of a thrown value: the API's error, or a network failure after the client's retries. */
export function errorResult(err: unknown): CallToolResult {
  if (err instanceof MailroomError)
    return toolError(err.code, err.message, { errors: err.errors, requestId: err.requestId });
  return toolError(
    'NETWORK_ERROR',
    `The Mailroom API could not be reached: ${err instanceof Error ? err.message : String(err)}`,
  );
}

/** What an operation of the typed client resolves to. */
export interface CallOutcome<T> {
  data?: Envelope<T>;
  error?: unknown;
  response: Response;
}

/**
 * Runs one API call and answers it as a tool result.
 *
 * @param shape - picks what the agent needs from `data` (default: all of it).
 */
export async function answer<T>(
  call: Promise<CallOutcome<T>>,
  shape: (data: T) => unknown = (d) => d,
): Promise<CallToolResult> {
  try {
    const out = await call;
    if (out.data === undefined || !out.response.ok)
      return errorResult(new MailroomError(out.response.status, out.error));
    return toolResult(shape(out.data.data));
  } catch (err) {
    return errorResult(err);
  }
}
