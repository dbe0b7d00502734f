/**
 * The benchmark's load generator: one keep-alive TCP connection per client, each request written as
 * prebuilt bytes (head + body), each response read just far enough to know its status and where it
 * ends. The load generator shares the machine's 2 cores with the service, so every CPU-second it
 * spends is one the service does not get: node:http's client cost ~5 CPU-s per million events in
 * batches of 1,000 and most of a core for single events, which the service's figures then paid for.
 */
import * as net from 'node:net';

export interface RawResponse {
  status: number;
  body: Buffer;
}

/** One HTTP/1.1 keep-alive connection sending one request at a time. */
export class RawConnection {
  private socket: net.Socket;
  private buffered: Buffer = Buffer.alloc(0);
  private waiting: { resolve: (r: RawResponse) => void; reject: (e: Error) => void } | undefined;
  private failure: Error | undefined;

  private constructor(socket: net.Socket) {
    this.socket = socket;
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => {
      this.buffered = this.buffered.length ? Buffer.concat([this.buffered, chunk]) : chunk;
      this.tryComplete();
    });
    const fail = (err: Error) => {
      this.failure = err;
      this.waiting?.reject(err);
      this.waiting = undefined;
    };
    socket.on('error', fail);
    socket.on('close', () => fail(new Error('connection closed by the server')));
  }

  static open(port: number, host = '127.0.0.1'): Promise<RawConnection> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(port, host, () => resolve(new RawConnection(socket)));
      socket.once('error', reject);
    });
  }

  /** Sends a prebuilt request (see `prepareRequest`) and resolves with the response. */
  send(request: PreparedRequest): Promise<RawResponse> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      this.waiting = { resolve, reject };
      // Head and body leave in one writev, without first being copied into one buffer.
      this.socket.cork();
      this.socket.write(request.head);
      this.socket.write(request.body);
      this.socket.uncork();
    });
  }

  close(): void {
    this.socket.removeAllListeners('close');
    this.socket.destroy();
  }

  private tryComplete(): void {
    if (!this.waiting) return;
    const buf = this.buffered;
    const headEnd = buf.indexOf('\r\n\r\n');
    if (headEnd < 0) return;
    const head = buf.toString('latin1', 0, headEnd);
    const status = Number(head.slice(9, 12));
    const start = headEnd + 4;
    let end: number;
    let body: Buffer;
    const length = /\r\ncontent-length:\s*(\d+)/i.exec(head);
    if (length) {
      end = start + Number(length[1]);
      if (buf.length < end) return;
      body = buf.subarray(start, end);
    } else if (/\r\ntransfer-encoding:\s*chunked/i.test(head)) {
      const parts: Buffer[] = [];
      let pos = start;
      for (;;) {
        const lineEnd = buf.indexOf('\r\n', pos);
        if (lineEnd < 0) return;
        const size = parseInt(buf.toString('latin1', pos, lineEnd), 16);
        if (buf.length < lineEnd + 2 + size + 2) return;
        if (size === 0) {
          end = lineEnd + 4;
          break;
        }
        parts.push(buf.subarray(lineEnd + 2, lineEnd + 2 + size));
        pos = lineEnd + 2 + size + 2;
      }
      body = Buffer.concat(parts);
    } else {
      end = start;
      body = Buffer.alloc(0);
    }
    this.buffered = buf.subarray(end);
    const w = this.waiting;
    this.waiting = undefined;
    w.resolve({ status, body });
  }
}

/** A POST as bytes: its head, and its body as given (not copied). */
export interface PreparedRequest {
  head: Buffer;
  body: Buffer;
}

/** A POST built once and sent as often as wanted. */
export function prepareRequest(port: number, p: string, body: Buffer | string, headers: Record<string, string>): PreparedRequest {
  const payload = typeof body === 'string' ? Buffer.from(body) : body;
  const lines = [`POST ${p} HTTP/1.1`, `host: 127.0.0.1:${port}`, `content-length: ${payload.length}`, ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)];
  return { head: Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), body: payload };
}
