/**
 * One address in front of the API servers, as a cluster's Service and load
 * balancer are: Debian's haproxy in TCP mode (TLS passes through to the
 * servers), a frontend on 127.0.0.1, every server a backend health-checked on
 * /readyz over TLS verified against the plane's CA.
 */
import { commandPath } from './network';

export const haproxyPath = (): string | undefined => commandPath('haproxy');

export function haproxyConfig(opts: { port: number; caFile: string; servers: { name: string; address: string; port: number }[] }): string {
  return [
    '# Written by svm dev up; regenerated on every up.',
    'global',
    '  maxconn 4096',
    '',
    'defaults',
    '  mode tcp',
    '  timeout connect 5s',
    // Watches stay open for minutes with little traffic.
    '  timeout client 1h',
    '  timeout server 1h',
    // A health check's answer may take this long (its connection still only 1 s): an API server busy with large
    // writes answers /readyz slowly, and with a 1 s timeout haproxy took the only server out and reset every
    // connection for seconds (a memory test's writes of ~900 KiB objects failed so). A server that is gone still
    // refuses at once and is out after two checks.
    '  timeout check 5s',
    '',
    'frontend kube-apiserver',
    `  bind 127.0.0.1:${opts.port}`,
    '  default_backend kube-apiservers',
    '',
    'backend kube-apiservers',
    '  balance roundrobin',
    '  option httpchk GET /readyz',
    '  http-check expect status 200',
    ...opts.servers.map(
      (s) =>
        `  server ${s.name} ${s.address}:${s.port} check check-ssl check-sni kubernetes.default.svc verify required ca-file ${opts.caFile} inter 1s fall 2 rise 1`,
    ),
    '',
  ].join('\n');
}
