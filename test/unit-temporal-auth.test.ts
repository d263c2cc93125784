/** The plane's Temporal authorization (src/dev/temporal-auth.ts): its key, its JWKS, its tokens, the server's config. */
import assert from 'node:assert/strict';
import * as crypto from 'node:crypto';
import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import {
  ensureTemporalAuth,
  mintTemporalToken,
  planeAdminToken,
  temporalPermission,
  temporalServerAuthConfig,
  TEMPORAL_SYSTEM_SCOPE,
} from '../src/dev/temporal-auth';
import { newTemporalServerRecord, temporalServerConfig } from '../src/dev/temporal-server';

const dir = mkdtempSync(path.join(tmpdir(), 'svm-auth-unit-'));

function decode(token: string): { header: Record<string, unknown>; claims: Record<string, unknown>; signed: string; signature: Buffer } {
  const [h, c, s] = token.split('.');
  return {
    header: JSON.parse(Buffer.from(h!, 'base64url').toString()) as Record<string, unknown>,
    claims: JSON.parse(Buffer.from(c!, 'base64url').toString()) as Record<string, unknown>,
    signed: `${h}.${c}`,
    signature: Buffer.from(s!, 'base64url'),
  };
}

void test('the signing key is made once (mode 0600) and its public half is in the JWKS, named by the kid the tokens carry', () => {
  const first = ensureTemporalAuth(dir);
  const again = ensureTemporalAuth(dir);
  assert.deepEqual(again, first, 'the same key the second time');
  assert.equal(statSync(first.key).mode & 0o777, 0o600);
  const jwks = JSON.parse(readFileSync(first.jwks, 'utf8')) as { keys: Array<Record<string, string>> };
  assert.equal(jwks.keys.length, 1);
  assert.equal(jwks.keys[0]!.kid, first.kid);
  assert.equal(jwks.keys[0]!.alg, 'RS256');
  assert.equal(jwks.keys[0]!.d, undefined, 'no private part in the JWKS');
});

void test('a token is an RS256 JWT the JWKS verifies, with its permissions, subject and expiry', () => {
  const auth = ensureTemporalAuth(dir);
  const now = Date.UTC(2026, 11, 7, 10, 0, 0);
  const token = mintTemporalToken(auth, {
    subject: 'east-worker',
    permissions: [temporalPermission('east', 'write')],
    ttlSeconds: 300,
    now,
  });
  const t = decode(token);
  assert.deepEqual(t.header, { alg: 'RS256', typ: 'JWT', kid: auth.kid });
  assert.deepEqual(t.claims, { sub: 'east-worker', permissions: ['east:write'], iat: now / 1000, exp: now / 1000 + 300 });
  const jwk = (JSON.parse(readFileSync(auth.jwks, 'utf8')) as { keys: crypto.JsonWebKey[] }).keys[0]!;
  const publicKey = crypto.createPublicKey({ key: jwk, format: 'jwk' });
  assert.ok(crypto.verify('sha256', Buffer.from(t.signed), publicKey, t.signature), 'the JWKS key verifies it');
  assert.ok(!crypto.verify('sha256', Buffer.from(`${t.signed}x`), publicKey, t.signature), 'and nothing else');
  // another plane's key signs tokens this JWKS does not verify
  const other = ensureTemporalAuth(mkdtempSync(path.join(tmpdir(), 'svm-auth-unit-other-')));
  const foreign = decode(mintTemporalToken(other, { subject: 'x', permissions: [], ttlSeconds: 60 }));
  assert.ok(!crypto.verify('sha256', Buffer.from(foreign.signed), publicKey, foreign.signature));
});

void test("the plane's own token is the system scope's administrator; permissions and lifetimes are checked", () => {
  const auth = ensureTemporalAuth(dir);
  assert.deepEqual(decode(planeAdminToken(auth)).claims.permissions, [`${TEMPORAL_SYSTEM_SCOPE}:admin`]);
  assert.throws(() => temporalPermission('east', 'worker' as 'write'), /a Temporal role is one of read, write, admin, got "worker"/);
  assert.throws(() => temporalPermission('east:admin', 'read'), /not a Temporal namespace name: "east:admin"/);
  assert.throws(() => mintTemporalToken(auth, { subject: 'x', permissions: [], ttlSeconds: 0 }), /lifetime must be positive/);
});

void test("temporal-server's authorization config: its JWT claim mapper and default authorizer, keys from the plane's JWKS file", () => {
  const auth = ensureTemporalAuth(dir);
  assert.deepEqual(temporalServerAuthConfig(auth), {
    jwtKeyProvider: { keySourceURIs: [`file://${auth.jwks}`], refreshInterval: '1m' },
    permissionsClaimName: 'permissions',
    authorizer: 'default',
    claimMapper: 'default',
  });
});

void test("with authorization the server runs an internal-frontend (its system worker's way past the authorizer); without, neither", async () => {
  const auth = ensureTemporalAuth(dir);
  const { frontendPort, ...rec } = await newTemporalServerRecord(dir);
  const ports = { ...rec.ports, internalFrontend: 20001, internalFrontendMembership: 20002 };
  const cfg = temporalServerConfig({ frontendPort, rec: { ...rec, ports, auth }, password: 'pw', logLevel: 'warn' }) as {
    global: { authorization?: unknown };
    services: Record<string, { rpc: { grpcPort: number; membershipPort: number } }>;
  };
  assert.deepEqual(cfg.global.authorization, temporalServerAuthConfig(auth));
  assert.deepEqual(cfg.services['internal-frontend']?.rpc.grpcPort, 20001);
  assert.deepEqual(cfg.services['internal-frontend']?.rpc.membershipPort, 20002);
  const plain = temporalServerConfig({ frontendPort, rec, password: 'pw', logLevel: 'warn' }) as typeof cfg;
  assert.equal(plain.global.authorization, undefined, 'no authorization without --temporal-auth');
  assert.equal(plain.services['internal-frontend'], undefined);
});
