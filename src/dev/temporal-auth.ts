/**
 * A plane's Temporal authorization (`svm dev up --temporal server --temporal-auth`): temporal-server's own JWT claim
 * mapper and default authorizer, as a secured production server runs them, with a signing key the plane makes.
 *
 * What the server enforces (go.temporal.io/server common/authorization, read at v1.32.2): a JWT's `permissions`
 * claim lists `<namespace>:<role>` (read, write, admin; `temporal-system:<role>` for every namespace and the
 * cluster-wide calls); a call on a namespace needs the role its API asks (reads: read; starts, signals, polls and
 * completions: write; namespace and search attribute administration: admin). Nothing finer: no permission per task
 * queue, workflow ID or Nexus endpoint. (The claim mapper also knows `worker`, but the default authorizer compares
 * roles as numbers and `worker` ranks below `read`: it grants nothing, so a worker needs `write`.) The server's own system worker reaches the frontend through the
 * internal-frontend service, which skips the authorizer.
 *
 * DIR/pki/temporal-auth/ holds the RSA signing key (the plane's, never a client's) and the JWKS the server reads
 * through a file:// URI. `mintTemporalToken` signs a token; the plane's env file carries a `temporal-system:admin` one as
 * TEMPORAL_API_KEY (svm and the Temporal CLI send it as `authorization: Bearer`), and `svm dev token` mints others.
 */
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';

/** The files of a plane's Temporal authorization. */
export interface TemporalAuthFiles {
  /** The RSA private key that signs the plane's tokens (PEM, mode 0600). */
  key: string;
  /** The public key set temporal-server reads (keySourceURIs: file://). */
  jwks: string;
  /** The key's id, in the JWKS and in each token's header. */
  kid: string;
}

/** A role temporal-server's default authorizer knows. */
export type TemporalRole = 'read' | 'write' | 'admin';

export const TEMPORAL_ROLES: readonly TemporalRole[] = ['read', 'write', 'admin'];

/** The claim's scope for every namespace and the cluster-wide calls (temporal-server's system namespace). */
export const TEMPORAL_SYSTEM_SCOPE = 'temporal-system';

/** How long the plane's own admin token lasts: a plane lives for hours; a week leaves room for a long session. */
const ADMIN_TOKEN_TTL_SECONDS = 7 * 24 * 3600;

/** Makes (once) the plane's signing key and its JWKS under DIR/pki/temporal-auth. */
export function ensureTemporalAuth(dir: string): TemporalAuthFiles {
  const base = path.join(dir, 'pki', 'temporal-auth');
  const keyFile = path.join(base, 'signing-key.pem');
  const jwksFile = path.join(base, 'jwks.json');
  fs.mkdirSync(base, { recursive: true, mode: 0o700 });
  if (!fs.existsSync(keyFile)) {
    const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
    fs.writeFileSync(keyFile, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
  }
  const privateKey = crypto.createPrivateKey(fs.readFileSync(keyFile));
  const jwk = crypto.createPublicKey(privateKey).export({ format: 'jwk' });
  const kid = crypto
    .createHash('sha256')
    .update(`${String(jwk.n)}.${String(jwk.e)}`)
    .digest('base64url')
    .slice(0, 16);
  fs.writeFileSync(jwksFile, JSON.stringify({ keys: [{ ...jwk, kid, alg: 'RS256', use: 'sig' }] }, null, 2) + '\n');
  return { key: keyFile, jwks: jwksFile, kid };
}

/** temporal-server's `global.authorization`: its JWT claim mapper and default authorizer, keys from the plane's JWKS. */
export function temporalServerAuthConfig(auth: TemporalAuthFiles): Record<string, unknown> {
  return {
    jwtKeyProvider: { keySourceURIs: [`file://${auth.jwks}`], refreshInterval: '1m' },
    permissionsClaimName: 'permissions',
    authorizer: 'default',
    claimMapper: 'default',
  };
}

/** A permission as the claim lists it: a namespace's role, or TEMPORAL_SYSTEM_SCOPE's for every namespace. */
export function temporalPermission(namespace: string, role: TemporalRole): string {
  if (!TEMPORAL_ROLES.includes(role)) throw new Error(`a Temporal role is one of ${TEMPORAL_ROLES.join(', ')}, got "${role}"`);
  if (!/^[A-Za-z0-9._-]+$/.test(namespace)) throw new Error(`not a Temporal namespace name: "${namespace}"`);
  return `${namespace}:${role}`;
}

/** A token signed by the plane's key (RS256): its subject and permissions, valid from now for ttlSeconds. */
export function mintTemporalToken(
  auth: TemporalAuthFiles,
  claims: { subject: string; permissions: string[]; ttlSeconds: number; now?: number },
): string {
  if (!(claims.ttlSeconds > 0)) throw new Error(`a token's lifetime must be positive, got ${claims.ttlSeconds} s`);
  const iat = Math.floor((claims.now ?? Date.now()) / 1000);
  const part = (v: object) => Buffer.from(JSON.stringify(v)).toString('base64url');
  const unsigned = `${part({ alg: 'RS256', typ: 'JWT', kid: auth.kid })}.${part({
    sub: claims.subject,
    permissions: claims.permissions,
    iat,
    exp: iat + claims.ttlSeconds,
  })}`;
  const signature = crypto.sign('sha256', Buffer.from(unsigned), crypto.createPrivateKey(fs.readFileSync(auth.key)));
  return `${unsigned}.${signature.toString('base64url')}`;
}

/** The plane's own token: every namespace, as administrator (the namespaces, the search attributes, the tests). */
export function planeAdminToken(auth: TemporalAuthFiles): string {
  return mintTemporalToken(auth, {
    subject: 'svm-dev-plane',
    permissions: [`${TEMPORAL_SYSTEM_SCOPE}:admin`],
    ttlSeconds: ADMIN_TOKEN_TTL_SECONDS,
  });
}
