/**
 * The environment variables the configuration reads (the union of every slice `loadConfig` composes), found by
 * watching it read an empty environment: deployment files are checked against it (test/deploy, test/api/deploy).
 */
import { loadConfig } from '@mailroom/config/config';

/** Every variable name `loadConfig` reads. */
export function acceptedVariables(): Set<string> {
  const read = new Set<string>();
  const env = new Proxy(
    {},
    {
      get: (_target, name) => {
        if (typeof name === 'string') read.add(name);
        return undefined;
      },
    },
  );
  loadConfig(env);
  return read;
}
