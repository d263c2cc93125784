/**
 * The plane's TLS, as a cluster's: its own CA (DIR/pki/ca.crt) and a serving
 * certificate per API server signed by it, with the names a client inside a
 * cluster uses (kubernetes.default.svc, the Service IP 10.96.0.1) and the
 * server's own address. Kubeconfigs carry the CA; nothing skips verification.
 * Made with the openssl CLI.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { commandPath } from './network';

/** The first IP of --service-cluster-ip-range=10.96.0.0/16: the `kubernetes` Service's. */
export const SERVICE_IP = '10.96.0.1';
export const SERVICE_DNS_NAMES = [
  'kubernetes',
  'kubernetes.default',
  'kubernetes.default.svc',
  'kubernetes.default.svc.cluster.local',
  'localhost',
];

function openssl(args: string[]): void {
  const bin = commandPath('openssl');
  if (!bin)
    throw new Error(
      'the dev plane makes its certificates with the openssl CLI, which is missing: run `bash scripts/ensure-plane-packages.sh` (or apt-get install openssl)',
    );
  const r = spawnSync(bin, args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`openssl ${args.join(' ')} failed: ${(r.stderr || r.error?.message || '').trim()}`);
}

export interface Ca {
  cert: string;
  key: string;
}

/** The plane's CA in pkiDir (ca.crt, ca.key), made once; `cn` names it (the Temporal server's CA is another one). */
export function ensureCa(pkiDir: string, cn = 'svm-dev-plane-ca'): Ca {
  fs.mkdirSync(pkiDir, { recursive: true });
  const cert = path.join(pkiDir, 'ca.crt');
  const key = path.join(pkiDir, 'ca.key');
  if (!fs.existsSync(cert) || !fs.existsSync(key)) {
    openssl([
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-days',
      '3650',
      '-subj',
      `/CN=${cn}`,
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    ]);
    fs.chmodSync(key, 0o600);
  }
  return { cert, key };
}

/**
 * A serving certificate for `ips` and the Service names, signed by the CA.
 * Made again when its names changed (a server that moved to another address).
 */
export function ensureServingCert(ca: Ca, dir: string, ips: string[]): { cert: string; key: string } {
  const san = [...SERVICE_DNS_NAMES.map((d) => `DNS:${d}`), ...[...new Set(['127.0.0.1', SERVICE_IP, ...ips])].map((i) => `IP:${i}`)].join(
    ',',
  );
  return issue(ca, dir, 'tls', { cn: 'kube-apiserver', san, usage: ['serverAuth'] });
}

export type KeyUsage = 'serverAuth' | 'clientAuth';

/**
 * A certificate DIR/NAME.crt (key NAME.key) signed by the CA: CN `cn`, the
 * subject alternative names `san` (e.g. `DNS:localhost,IP:127.0.0.1`; none
 * for a client certificate) and the extended key usages. Made again when
 * any of these changed or the CA is newer.
 */
export function ensureCert(
  ca: Ca,
  dir: string,
  name: string,
  opts: { cn: string; san?: string; usage: KeyUsage[] },
): { cert: string; key: string } {
  return issue(ca, dir, name, opts);
}

function issue(ca: Ca, dir: string, name: string, opts: { cn: string; san?: string; usage: KeyUsage[] }): { cert: string; key: string } {
  fs.mkdirSync(dir, { recursive: true });
  const cert = path.join(dir, `${name}.crt`);
  const key = path.join(dir, `${name}.key`);
  // tls.san for the API servers' certificates (kept: existing planes reuse their certificates).
  const specFile = path.join(dir, name === 'tls' ? 'tls.san' : `${name}.spec`);
  const spec = name === 'tls' ? (opts.san ?? '') : JSON.stringify(opts);
  const caMtime = fs.statSync(ca.cert).mtimeMs;
  const fresh =
    fs.existsSync(cert) &&
    fs.existsSync(key) &&
    fs.existsSync(specFile) &&
    fs.readFileSync(specFile, 'utf8') === spec &&
    fs.statSync(cert).mtimeMs >= caMtime;
  if (fresh) return { cert, key };
  const csr = path.join(dir, `${name}.csr`);
  const ext = path.join(dir, `${name}.ext`);
  const serverAuth = opts.usage.includes('serverAuth');
  fs.writeFileSync(
    ext,
    [
      ...(opts.san ? [`subjectAltName=${opts.san}`] : []),
      'basicConstraints=CA:FALSE',
      `keyUsage=critical,digitalSignature${serverAuth ? ',keyEncipherment' : ''}`,
      `extendedKeyUsage=${opts.usage.join(',')}`,
    ].join('\n') + '\n',
  );
  openssl([
    'req',
    '-new',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    key,
    '-out',
    csr,
    '-subj',
    `/CN=${opts.cn}`,
  ]);
  fs.chmodSync(key, 0o600);
  openssl(['x509', '-req', '-in', csr, '-CA', ca.cert, '-CAkey', ca.key, '-CAcreateserial', '-out', cert, '-days', '825', '-extfile', ext]);
  fs.rmSync(csr, { force: true });
  fs.writeFileSync(specFile, spec);
  return { cert, key };
}
