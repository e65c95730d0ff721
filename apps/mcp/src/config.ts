/**
 * The MCP server's configuration, read once from the environment its host starts it with.
 *
 * @module
 */

/** What the server needs to reach the API. */
export interface McpConfig {
  /** `MAILROOM_API_KEY`: a secret project key (`sk_…`); the tools use secret-key routes. */
  apiKey: string;
  /** `MAILROOM_BASE_URL`: where the API is served, e.g. `https://mail.example.com`. */
  baseUrl: string;
}

/** A missing or malformed variable, named in the message. */
export class McpConfigError extends Error {
  override readonly name = 'McpConfigError';
}

/**
 * Parses the configuration.
 *
 * @throws {@link McpConfigError} naming the first missing or malformed variable.
 */
export function loadMcpConfig(env: Record<string, string | undefined>): McpConfig {
  const apiKey = env.MAILROOM_API_KEY?.trim() ?? '';
  if (!apiKey) throw new McpConfigError('MAILROOM_API_KEY is required: a secret key of the project (sk_…)');
  if (apiKey.startsWith('pk_'))
    throw new McpConfigError('MAILROOM_API_KEY is a public key (pk_…): the tools need a secret key (sk_…)');
  const baseUrl = env.MAILROOM_BASE_URL?.trim() ?? '';
  if (!baseUrl)
    throw new McpConfigError(
      'MAILROOM_BASE_URL is required: where the Mailroom API is served, e.g. https://mail.example.com',
    );
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    throw new McpConfigError(`MAILROOM_BASE_URL is not a URL: ${baseUrl}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new McpConfigError(`MAILROOM_BASE_URL must be http(s): ${baseUrl}`);
  return { apiKey, baseUrl: withoutTrailingSlashes(url.toString()) };
}

/** `url` without its trailing slashes (a scan from the end: a `/\/+$/` regex is quadratic on a run of slashes). */
function withoutTrailingSlashes(url: string): string {
  let end = url.length;
  while (end > 0 && url[end - 1] === '/') end--;
  return url.slice(0, end);
}
