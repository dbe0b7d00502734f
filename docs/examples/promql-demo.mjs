// Writes the PromQL demo's remote-write request (docs/examples/promql-remote-write.bin: request counters,
// a latency histogram and a gauge at 15 s, recorded from 2026-01-01T00:00:00Z) to stdout with its samples
// moved to start at the time given (ISO 8601 or epoch seconds): remote write refuses samples older than
// P_SIGNAL_TIME_PAST_LIMIT (30 days), as Prometheus refuses samples out of its head's bounds.
// Run from the repository (it uses the project's protobufjs and snappy):
//   node docs/examples/promql-demo.mjs 2026-11-28T08:00:00Z > promql-demo.bin
import { readFileSync } from 'node:fs';
import protobuf from 'protobufjs';
import snappy from 'snappy';

const RECORDED_AT = Date.parse('2026-01-01T00:00:00Z');
const arg = process.argv[2] ?? '';
const start = /^\d+$/.test(arg) ? Number(arg) * 1000 : Date.parse(arg);
if (!Number.isFinite(start)) throw new Error(`usage: node promql-demo.mjs <start time>, not "${arg}"`);
const shift = BigInt(start - RECORDED_AT);

// WriteRequest { repeated TimeSeries timeseries = 1 }  TimeSeries { repeated Label labels = 1; repeated Sample samples = 2 }
// Sample { double value = 1; int64 timestamp = 2 }: every field but a sample's timestamp is copied as it is.
const moveSample = (bytes) => {
  const r = protobuf.Reader.create(bytes);
  const w = protobuf.Writer.create();
  while (r.pos < r.len) {
    const tag = r.uint32();
    if (tag === ((1 << 3) | 1)) w.uint32(tag).double(r.double());
    else if (tag === ((2 << 3) | 0)) w.uint32(tag).int64((BigInt(r.int64().toString()) + shift).toString());
    else throw new Error(`unexpected Sample field tag ${tag}`);
  }
  return w.finish();
};
const moveSeries = (bytes) => {
  const r = protobuf.Reader.create(bytes);
  const w = protobuf.Writer.create();
  while (r.pos < r.len) {
    const tag = r.uint32();
    const field = r.bytes();
    w.uint32(tag).bytes(tag === ((2 << 3) | 2) ? moveSample(field) : field);
  }
  return w.finish();
};

const body = snappy.uncompressSync(readFileSync(new URL('./promql-remote-write.bin', import.meta.url)));
const r = protobuf.Reader.create(body);
const w = protobuf.Writer.create();
while (r.pos < r.len) {
  const tag = r.uint32();
  const field = r.bytes();
  w.uint32(tag).bytes(tag === ((1 << 3) | 2) ? moveSeries(field) : field);
}
process.stdout.write(snappy.compressSync(Buffer.from(w.finish())));
