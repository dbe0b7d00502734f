import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs/promises';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { CreateBucketCommand, DeleteObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { sleep } from './wait.ts';

export interface S3TestServer {
  endpoint: string;
  bucket: string;
  accessKey: string;
  secretKey: string;
  port: number;
  /** An abrupt outage: the port stops accepting and open connections are reset. Objects are kept. */
  stop: () => Promise<void>;
  /** Ends the outage: the same endpoint answers again, with every object it had. */
  start: () => Promise<void>;
  /** A frozen server (SIGSTOP): connections are accepted by the relay but nothing answers. */
  freeze: () => void;
  /** Ends the freeze (SIGCONT). */
  thaw: () => void;
  /** Stops the server for good (end of the test file). */
  close: () => Promise<void>;
}

/**
 * The child's program: moto's S3 server in a thread, on loopback, on a port of the kernel's choice that
 * it reports (`ready <port>`). It exits when its stdin closes, so a crashed test run leaves no server behind.
 */
const CHILD = String.raw`
import logging, os, sys, threading
logging.getLogger('werkzeug').setLevel(logging.ERROR)
from moto.server import ThreadedMotoServer
server = ThreadedMotoServer(ip_address='127.0.0.1', port=0, verbose=False)
server.start()
print('ready', server.get_host_and_port()[1], flush=True)
sys.stdin.read()
os._exit(0)
`;

/**
 * The interpreter with moto, as scripts/test-setup.d/10-moto.sh found or installed it (`npm test` runs it
 * first). Tests install nothing themselves: without it, this fails saying what to run.
 */
async function motoPython(): Promise<string> {
  const cache = process.env.LAKEHOUSE_TEST_CACHE ?? path.join(os.homedir(), '.cache', 'lakehouse-test');
  const file = path.join(cache, 'moto-python');
  const python = (await fs.readFile(file, 'utf8').catch(() => '')).trim();
  if (!python || !(await fs.access(python, fs.constants.X_OK).then(() => true, () => false))) {
    throw new Error(`no Python with moto (${file} is missing or stale): run \`bash scripts/test-setup.sh\` (npm test runs it first)`);
  }
  return python;
}

/** moto in a child process, and the port it bound. */
async function spawnMoto(): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(await motoPython(), ['-c', CHILD], { stdio: ['pipe', 'pipe', 'pipe'] });
  let output = '';
  child.stderr!.on('data', (d) => (output += d.toString()));
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`moto did not start within 30 s: ${output}`));
    }, 30_000);
    let stdout = '';
    child.stdout!.on('data', (d) => {
      stdout += d.toString();
      const ready = /ready (\d+)\n/.exec(stdout);
      if (ready) {
        clearTimeout(timer);
        resolve(Number(ready[1]));
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`moto exited (${code}): ${output}`));
    });
  });
  return { child, port };
}

/**
 * Creates the bucket and checks, with real requests, that the server honours conditional writes: a
 * second `PutObject` with `If-None-Match: *` must fail with 412. The service relies on it (dataset
 * creation across workers), so a server that ignores it must fail the suite, not pass it silently.
 */
async function prepare(endpoint: string, bucket: string): Promise<void> {
  const client = new S3Client({
    endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    maxAttempts: 1,
  });
  try {
    const deadline = Date.now() + 15_000;
    for (;;) {
      try {
        await client.send(new CreateBucketCommand({ Bucket: bucket }));
        break;
      } catch (err) {
        if (Date.now() > deadline) throw err;
        await sleep(100);
      }
    }
    const probe = { Bucket: bucket, Key: '.conditional-write-probe', Body: 'x', IfNoneMatch: '*' };
    await client.send(new PutObjectCommand(probe));
    const second = await client.send(new PutObjectCommand(probe)).then(
      () => 200,
      (err: { $metadata?: { httpStatusCode?: number } }) => err.$metadata?.httpStatusCode,
    );
    await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: probe.Key }));
    if (second !== 412) {
      throw new Error(`the S3 test server does not honour If-None-Match on PutObject (a second conditional put answered ${second}, not 412)`);
    }
  } finally {
    client.destroy();
  }
}

/**
 * An S3-protocol server on loopback with one bucket: moto (`moto[server]` from PyPI) in a child
 * process, behind a TCP relay in this process. The relay is what `stop()` and `start()` cut and restore,
 * so an outage resets connections as a dead server would while the objects survive in moto.
 */
export async function startS3Server(): Promise<S3TestServer> {
  const bucket = 'telemetry';
  const { child, port: inner } = await spawnMoto();
  const sockets = new Set<net.Socket>();
  const relay = net.createServer((client) => {
    const upstream = net.connect(inner, '127.0.0.1');
    sockets.add(client).add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream).pipe(client);
  });
  // Port 0 at first; a restart (start() after stop()) takes back the port clients were given.
  let port = 0;
  const listen = async () => {
    for (let attempt = 0; ; attempt++) {
      try {
        await new Promise<void>((resolve, reject) => {
          relay.once('error', reject);
          relay.listen(port, '127.0.0.1', () => {
            relay.off('error', reject);
            port = (relay.address() as net.AddressInfo).port;
            resolve();
          });
        });
        return;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE' || attempt >= 50) throw err;
        await sleep(100);
      }
    }
  };
  let listening = false;
  const stop = async () => {
    if (!listening) return;
    listening = false;
    const closed = new Promise<void>((r) => relay.close(() => r()));
    for (const s of sockets) s.destroy();
    sockets.clear();
    await closed;
  };
  const start = async () => {
    if (listening) return;
    await listen();
    listening = true;
  };
  await start();
  const endpoint = `http://127.0.0.1:${port}`;
  try {
    await prepare(endpoint, bucket);
  } catch (err) {
    await stop();
    child.kill('SIGKILL');
    throw err;
  }
  const exited = new Promise<void>((r) => (child.exitCode !== null ? r() : child.once('exit', () => r())));
  return {
    endpoint,
    bucket,
    accessKey: 'test',
    secretKey: 'test',
    port,
    stop,
    start,
    freeze: () => void child.kill('SIGSTOP'),
    thaw: () => void child.kill('SIGCONT'),
    close: async () => {
      child.kill('SIGCONT');
      await stop();
      child.stdin!.end();
      const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** The service settings that point a worker at this S3 server. */
export function s3Env(s3: S3TestServer): Record<string, string> {
  return { P_STORAGE: 's3', P_S3_URL: s3.endpoint, P_S3_BUCKET: s3.bucket, P_S3_ACCESS_KEY: s3.accessKey, P_S3_SECRET_KEY: s3.secretKey };
}
