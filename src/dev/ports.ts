/** Loopback ports: a free one to listen on (the worker's, src/worker/free-port.ts), and whether something listens. */
import * as net from 'node:net';

export { freePort } from '../worker/free-port';

export function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const c = net.connect(port, '127.0.0.1', () => {
      c.end();
      resolve(true);
    });
    c.on('error', () => resolve(false));
  });
}
