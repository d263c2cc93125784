/** A real validating admission webhook for tests: an HTTPS server on 127.0.0.1 that denies updates by name. */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import * as https from 'node:https';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';

export interface DenyingWebhook {
  url: string;
  caBundle: string;
  denied: number;
  close(): Promise<void>;
}

export async function startDenyingWebhook(deny: (name: string) => boolean, message: string): Promise<DenyingWebhook> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'svm-webhook-'));
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', path.join(dir, 'key.pem'), '-out', path.join(dir, 'cert.pem'), '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
  const cert = readFileSync(path.join(dir, 'cert.pem'));
  const state = { denied: 0 };
  const server = https.createServer({ key: readFileSync(path.join(dir, 'key.pem')), cert }, (req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString('utf8')));
    req.on('end', () => {
      const review = JSON.parse(body) as { request: { uid: string; name: string } };
      const refuse = deny(review.request.name);
      if (refuse) state.denied++;
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid: review.request.uid, allowed: !refuse, ...(refuse ? { status: { code: 403, message } } : {}) } }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `https://127.0.0.1:${port}/validate`,
    caBundle: cert.toString('base64'),
    get denied() {
      return state.denied;
    },
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections(); // the API servers keep connections alive for ~90s otherwise
      }),
  };
}
