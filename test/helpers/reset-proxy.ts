/**
 * A loopback TCP proxy that resets connections mid-request: it forwards bytes
 * untouched (TLS passes through, so the API server's certificate stays valid
 * for the address the client dials) and reads only the TLS record headers of
 * what the client sends, to know when the handshake is over. After that, each
 * batch of application data the client sends (a request, or part of one) is
 * cut with probability `rate`: the client's socket gets a TCP RST
 * (resetAndDestroy) and the upstream connection is closed. Half the cuts
 * happen before the bytes go on (the API server never sees that request),
 * half a moment after (it may have acted on it, the client never hears).
 */
import * as net from 'node:net';

export interface ResetProxyStats {
  connections: number;
  /** Batches of application data from clients after their handshake. */
  requests: number;
  /** Cuts before forwarding the batch, and after. */
  resetsBeforeForward: number;
  resetsAfterForward: number;
}

export interface ResetProxy {
  /** https://127.0.0.1:port */
  url: string;
  readonly stats: ResetProxyStats;
  readonly resets: number;
  /** Stops cutting (connections go on as a plain proxy). */
  calm(): void;
  close(): Promise<void>;
}

const TLS_APPLICATION_DATA = 23;

/**
 * Counts the client's TLS application-data records in each chunk. In TLS 1.3
 * the client's first one is its encrypted Finished (the handshake's end); in
 * TLS 1.2 it is already a request. Either way, a chunk carrying any record
 * after the first is past the handshake.
 */
class TlsRecordReader {
  private pending = Buffer.alloc(0);
  private skip = 0; // bytes of a record body still to pass
  applicationRecords = 0;

  /** Reads a chunk's record headers; returns how many application-data records start in it. */
  push(chunk: Buffer): number {
    let started = 0;
    let buf = this.pending.length > 0 ? Buffer.concat([this.pending, chunk]) : chunk;
    for (;;) {
      if (this.skip > 0) {
        const n = Math.min(this.skip, buf.length);
        this.skip -= n;
        buf = buf.subarray(n);
        if (this.skip > 0) break;
      }
      if (buf.length < 5) break;
      const type = buf[0]!;
      const length = buf.readUInt16BE(3);
      if (type === TLS_APPLICATION_DATA) {
        this.applicationRecords++;
        started++;
      }
      this.skip = length;
      buf = buf.subarray(5);
    }
    this.pending = Buffer.from(buf);
    return started;
  }
}

export async function startResetProxy(target: { host: string; port: number }, rate: number): Promise<ResetProxy> {
  const stats: ResetProxyStats = { connections: 0, requests: 0, resetsBeforeForward: 0, resetsAfterForward: 0 };
  const sockets = new Set<net.Socket>();
  let cutting = true;
  const server = net.createServer((client) => {
    stats.connections++;
    const upstream = net.connect(target.port, target.host);
    sockets.add(client);
    sockets.add(upstream);
    const records = new TlsRecordReader();
    let cut = false;
    const drop = () => {
      cut = true;
      client.resetAndDestroy();
      upstream.destroy();
    };
    client.on('data', (chunk: Buffer) => {
      if (cut) return;
      const before = records.applicationRecords;
      const started = records.push(chunk);
      const pastHandshake = started > 0 && records.applicationRecords > 1 && before + started > 1;
      if (pastHandshake) {
        stats.requests++;
        if (cutting && Math.random() < rate) {
          if (Math.random() < 0.5) {
            stats.resetsBeforeForward++;
            drop();
            return;
          }
          stats.resetsAfterForward++;
          cut = true;
          upstream.write(chunk);
          setTimeout(drop, Math.floor(Math.random() * 30));
          return;
        }
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (!cut) client.write(chunk);
    });
    client.on('end', () => upstream.end());
    upstream.on('end', () => client.end());
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => (cut ? undefined : client.resetAndDestroy()));
    client.on('close', () => {
      sockets.delete(client);
      upstream.destroy();
    });
    upstream.on('close', () => {
      sockets.delete(upstream);
      if (!client.destroyed) client.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `https://127.0.0.1:${port}`,
    stats,
    get resets() {
      return stats.resetsBeforeForward + stats.resetsAfterForward;
    },
    calm() {
      cutting = false;
    },
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        for (const s of sockets) s.destroy();
      }),
  };
}
