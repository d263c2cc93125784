/** What the image sets for `svm worker`: the benches run the worker with it, so their figures are the image's. */
import { readFileSync } from 'node:fs';
import * as path from 'node:path';

/** The ENV lines of the Dockerfile's runtime stage, without NODE_ENV. */
export function imageEnv(): Record<string, string> {
  const dockerfile = readFileSync(path.join(__dirname, '..', '..', 'Dockerfile'), 'utf8');
  const runtime = dockerfile.slice(dockerfile.search(/^FROM .* AS runtime$/m));
  const env: Record<string, string> = {};
  for (const m of runtime.matchAll(/^ENV (\w+)=(\S*)$/gm)) if (m[1] !== 'NODE_ENV') env[m[1]!] = m[2]!;
  return env;
}
