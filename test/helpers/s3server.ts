import { spawn } from 'node:child_process';
import * as fs from 'node:fs/promises';
import { createRequire } from 'node:module';
import * as os from 'node:os';
import * as path from 'node:path';
import { freePort } from './server.ts';

export interface S3TestServer {
  endpoint: string;
  bucket: string;
  accessKey: string;
  secretKey: string;
  dir: string;
  port: number;
  /** SIGKILLs the server (an abrupt outage: open connections are reset); the data stays in `dir`. */
  stop: () => Promise<void>;
}

/**
 * The child's program, passed with `node -e` so it needs no file of its own. argv: s3rver's
 * package directory, port, data directory, bucket.
 *
 * Two s3rver 3.7.1 bugs are patched here, both in ListObjects, which the service depends on:
 * - The store walks the bucket directory tree, so keys come back in directory order ("a/x" before
 *   "a-b"), not S3's lexicographic order, and paging with start-after then skips keys.
 * - Continuation tokens are DES-encrypted, which OpenSSL 3 (Node >= 17) only has in its legacy
 *   provider: every truncated listing fails with 500 InternalError without --openssl-legacy-provider.
 *
 * The child exits when its stdin closes, so a crashed test run leaves no server behind.
 */
const CHILD = String.raw`
const path = require('path');
const [pkgDir, port, dir, bucket] = process.argv.slice(1);
const S3rver = require(pkgDir);
const FilesystemStore = require(path.join(pkgDir, 'lib/stores/filesystem.js'));
const S3Object = require(path.join(pkgDir, 'lib/models/object.js'));
const { walk } = require(path.join(pkgDir, 'lib/utils.js'));

const OBJECT_SUFFIX = '._S3rver_object';
FilesystemStore.prototype.listObjects = async function listObjects(bucketName, options) {
  const { delimiter = '', startAfter = '', prefix = '', maxKeys = Infinity } = options;
  const bucketPath = this.getBucketPath(bucketName);
  const all = [];
  for (const file of walk(bucketPath)) {
    if (!file.endsWith(OBJECT_SUFFIX)) continue;
    const key = file.slice(bucketPath.length + 1, -OBJECT_SUFFIX.length);
    if (key.startsWith(prefix) && key > startAfter) all.push(key);
  }
  all.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const commonPrefixes = new Set();
  const keys = [];
  let isTruncated = false;
  for (const key of all) {
    const cut = delimiter ? key.indexOf(delimiter, prefix.length) : -1;
    if (cut !== -1) {
      commonPrefixes.add(key.slice(0, cut + delimiter.length));
      continue;
    }
    if (keys.length >= maxKeys) {
      isTruncated = true;
      break;
    }
    keys.push(key);
  }
  const objects = [];
  for (const key of keys) {
    try {
      objects.push(new S3Object(bucketName, key, null, await this.getMetadata(bucketName, key)));
    } catch (err) {
      // Deleted between the walk and now.
      if (err.code !== 'ENOENT') throw err;
    }
  }
  return { objects, commonPrefixes: [...commonPrefixes].sort(), isTruncated };
};

const server = new S3rver({
  address: '127.0.0.1',
  port: Number(port),
  directory: dir,
  silent: true,
  configureBuckets: [{ name: bucket }],
  // The SDK signs headers s3rver does not canonicalise the same way; signatures are not under test.
  allowMismatchedSignatures: true,
});
server.run().then(
  (addr) => process.stdout.write('ready ' + addr.port + '\n'),
  (err) => {
    process.stderr.write(String(err && err.stack || err) + '\n');
    process.exit(err && err.code === 'EADDRINUSE' ? 98 : 1);
  },
);
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
`;

const s3rverDir = path.dirname(createRequire(import.meta.url).resolve('s3rver/package.json'));

async function spawnServer(port: number, dir: string, bucket: string): Promise<{ stop: () => Promise<void> } | 'in-use'> {
  const child = spawn(process.execPath, ['--openssl-legacy-provider', '-e', CHILD, s3rverDir, String(port), dir, bucket], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let output = '';
  child.stderr!.on('data', (d) => (output += d.toString()));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const started = await new Promise<boolean>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`s3rver did not start within 15 s: ${output}`));
    }, 15_000);
    let stdout = '';
    child.stdout!.on('data', (d) => {
      stdout += d.toString();
      if (stdout.includes('ready')) {
        clearTimeout(timer);
        resolve(true);
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      if (code === 98) resolve(false);
      else reject(new Error(`s3rver exited (${code}): ${output}`));
    });
  });
  if (!started) return 'in-use';
  return {
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

/**
 * An S3-protocol server (s3rver) on loopback, in a child process, with one bucket. Start it again
 * with the same port and dir to bring the same bucket and objects back after an outage.
 */
export async function startS3Server(opts: { port?: number; dir?: string } = {}): Promise<S3TestServer> {
  const dir = opts.dir ?? (await fs.mkdtemp(path.join(os.tmpdir(), 's3rver-')));
  const bucket = 'telemetry';
  let port = opts.port ?? (await freePort());
  let server: Awaited<ReturnType<typeof spawnServer>> | undefined;
  for (let attempt = 0; ; attempt++) {
    server = await spawnServer(port, dir, bucket);
    if (server !== 'in-use') break;
    if (attempt >= 20) throw new Error(`port ${port} stayed in use`);
    // A fixed port (a restart) may still be held briefly; a free port raced by another process is simply replaced.
    if (opts.port) await new Promise((r) => setTimeout(r, 100));
    else port = await freePort();
  }
  return {
    endpoint: `http://127.0.0.1:${port}`,
    bucket,
    accessKey: 'S3RVER',
    secretKey: 'S3RVER',
    dir,
    port,
    stop: server.stop,
  };
}
