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

export function ensureCa(pkiDir: string): Ca {
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
      '/CN=svm-dev-plane-ca',
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
  fs.mkdirSync(dir, { recursive: true });
  const cert = path.join(dir, 'tls.crt');
  const key = path.join(dir, 'tls.key');
  const sanFile = path.join(dir, 'tls.san');
  const san = [...SERVICE_DNS_NAMES.map((d) => `DNS:${d}`), ...[...new Set(['127.0.0.1', SERVICE_IP, ...ips])].map((i) => `IP:${i}`)].join(
    ',',
  );
  const caMtime = fs.statSync(ca.cert).mtimeMs;
  const fresh =
    fs.existsSync(cert) &&
    fs.existsSync(key) &&
    fs.existsSync(sanFile) &&
    fs.readFileSync(sanFile, 'utf8') === san &&
    fs.statSync(cert).mtimeMs >= caMtime;
  if (fresh) return { cert, key };
  const csr = path.join(dir, 'tls.csr');
  const ext = path.join(dir, 'tls.ext');
  fs.writeFileSync(
    ext,
    [
      `subjectAltName=${san}`,
      'basicConstraints=CA:FALSE',
      'keyUsage=critical,digitalSignature,keyEncipherment',
      'extendedKeyUsage=serverAuth',
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
    '/CN=kube-apiserver',
  ]);
  fs.chmodSync(key, 0o600);
  openssl(['x509', '-req', '-in', csr, '-CA', ca.cert, '-CAkey', ca.key, '-CAcreateserial', '-out', cert, '-days', '825', '-extfile', ext]);
  fs.rmSync(csr, { force: true });
  fs.writeFileSync(sanFile, san);
  return { cert, key };
}
