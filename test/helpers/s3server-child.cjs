// Runs s3rver in its own process so tests can stop and restart "S3" (outages) on the same port and
// directory. Prints one line `ready <port>` once listening.
const S3rver = require('s3rver');
const [port, dir, bucket] = process.argv.slice(2);
const server = new S3rver({
  address: '127.0.0.1',
  port: Number(port),
  directory: dir,
  silent: true,
  configureBuckets: [{ name: bucket }],
  allowMismatchedSignatures: true,
});
server.run().then((addr) => {
  process.stdout.write(`ready ${addr.port}\n`);
});
process.on('SIGTERM', () => server.close().finally(() => process.exit(0)));
