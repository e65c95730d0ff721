/**
 * Readers of environment variables for the configuration slices (`load<Name>Config` in each package's
 * config.ts): each returns the typed value or its fallback, and throws a {@link ConfigError} naming the variable
 * when the value is malformed.
 *
 * @module
 */
import { parseTrustProxy, type TrustProxy } from './trust-proxy';

/** Thrown by a configuration loader when a variable is malformed; `variable` names it. */
export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`Invalid configuration: ${variable} ${message}`);
    this.name = 'ConfigError';
  }
}

/** The environment: variable name → raw value. */
export type Env = Record<string, string | undefined>;

/** A required string (trimmed), or `fallback`. @throws {@link ConfigError} when absent without a fallback. */
export function str(env: Env, name: string, fallback?: string): string {
  const v = env[name]?.trim();
  if (v) return v;
  if (fallback === undefined) throw new ConfigError(name, 'is required');
  return fallback;
}

/** A string (trimmed), or undefined when absent or blank. */
export function optional(env: Env, name: string): string | undefined {
  const v = env[name]?.trim();
  return v ? v : undefined;
}

/** A whole number in plain decimal within [min, max], or `fallback`. */
export function int(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name]?.trim();
  if (!raw) return fallback;
  if (!/^\d+$/.test(raw)) throw new ConfigError(name, `must be a whole number, got "${raw}"`);
  const n = Number(raw);
  if (n < min || n > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${n}`);
  return n;
}

/**
 * The variable that sets a renamed setting: `name`, or its former name when only that one is set (so a deployment
 * written for the former name keeps working). Both are read, so both count as accepted variables.
 */
export function renamed(env: Env, name: string, former: string): string {
  return env[name]?.trim() || !env[former]?.trim() ? name : former;
}

/** A fraction from 0 to 1 in plain decimal notation (`0.02`), or `fallback`. */
export function fraction(env: Env, name: string, fallback: number): number {
  const raw = env[name]?.trim();
  if (!raw) return fallback;
  if (!/^(0|1|0?\.\d+|[01]\.\d+)$/.test(raw) || Number(raw) > 1)
    throw new ConfigError(name, `must be a fraction from 0 to 1 (0.02 = 2%), got "${raw}"`);
  return Number(raw);
}

/** true/false (also 1/0, yes/no, on/off), or `fallback`. */
export function bool(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name]?.trim().toLowerCase();
  if (!raw) return fallback;
  if (['1', 'true', 'yes', 'on'].includes(raw)) return true;
  if (['0', 'false', 'no', 'off'].includes(raw)) return false;
  throw new ConfigError(name, `must be true or false, got "${raw}"`);
}

/** A comma-separated list (items trimmed, blanks dropped), or `fallback`. */
export function list(env: Env, name: string, fallback: readonly string[]): readonly string[] {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  return Object.freeze(
    raw
      .split(',')
      .map((v) => v.trim())
      .filter(Boolean),
  );
}

/** A comma-separated list of whole numbers within [min, max], or `fallback`. */
export function intList(
  env: Env,
  name: string,
  fallback: readonly number[],
  min: number,
  max: number,
): readonly number[] {
  const items = list(env, name, fallback.map(String));
  const values = items.map((v) => {
    if (!/^\d+$/.test(v)) throw new ConfigError(name, `must be whole numbers separated by commas, got "${v}"`);
    const n = Number(v);
    if (n < min || n > max) throw new ConfigError(name, `values must be between ${min} and ${max}, got ${n}`);
    return n;
  });
  return Object.freeze(values);
}

/** `TRUST_PROXY`, parsed (see trust-proxy.ts). */
export function trustProxy(env: Env): TrustProxy {
  const parsed = parseTrustProxy(optional(env, 'TRUST_PROXY'));
  if (!parsed.ok) throw new ConfigError('TRUST_PROXY', parsed.reason);
  return parsed.value;
}

/**
 * Which provider backs an SES feature the emulator lacks (`SES_ACCOUNT_PROVIDER`, `DOMAIN_IDENTITY_PROVIDER`):
 * `ses` or `local`; default `local` when `SES_ENDPOINT` is set, else `ses`.
 */
export function sesProvider(env: Env, name: string): 'ses' | 'local' {
  const v = optional(env, name);
  if (v === undefined) return optional(env, 'SES_ENDPOINT') ? 'local' : 'ses';
  if (v !== 'ses' && v !== 'local') throw new ConfigError(name, `must be ses or local, got "${v}"`);
  return v;
}

/** A URL with one of `protocols` (trailing slashes dropped), or `fallback`. */
export function url(env: Env, name: string, fallback: string | undefined, protocols: string[]): string | undefined {
  const raw = optional(env, name) ?? fallback;
  if (raw === undefined) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(name, `must be a URL, got "${raw}"`);
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(name, `must use ${protocols.join(' or ')}, got "${parsed.protocol}"`);
  }
  // Trailing slashes dropped without a regex (`/\/+$/` searches quadratically over a run of slashes).
  let end = raw.length;
  while (end > 0 && raw[end - 1] === '/') end--;
  return raw.slice(0, end);
}
