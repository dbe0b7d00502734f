import { spawn } from 'node:child_process';
import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { freePort } from './server.ts';

export interface S3TestServer {
  endpoint: string;
  bucket: string;
  accessKey: string;
  secretKey: string;
  dir: string;
  stop: () => Promise<void>;
}

/**
 * An S3-protocol server (s3rver, from npm) on loopback, in a child process. Start it again with the
 * same port and dir to bring the same bucket back after an outage.
 */
export async function startS3Server(opts: { port?: number; dir?: string } = {}): Promise<S3TestServer> {
  const dir = opts.dir ?? (await fs.mkdtemp(path.join(os.tmpdir(), 's3rver-')));
  const port = opts.port ?? (await freePort());
  const bucket = 'telemetry';
  const child = spawn(process.execPath, [path.join(import.meta.dirname, 's3server-child.cjs'), String(port), dir, bucket], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stderr!.on('data', (d) => (output += d.toString()));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`s3rver did not start: ${output}`)), 15_000);
    child.stdout!.on('data', (d) => {
      if (d.toString().includes('ready')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`s3rver exited (${code}): ${output}`));
    });
  });
  return {
    endpoint: `http://127.0.0.1:${port}`,
    bucket,
    accessKey: 'S3RVER',
    secretKey: 'S3RVER',
    dir,
    stop: async () => {
      if (child.exitCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}
