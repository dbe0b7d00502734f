// Writes a Prometheus remote-write 1.0 request (a snappy-compressed prometheus.WriteRequest) to stdout:
// two series, one sample each, stamped now. Run from the repository (it uses the project's protobufjs
// and snappy):  node docs/examples/remote-write.mjs > write-request.snappy
import protobuf from 'protobufjs';
import snappy from 'snappy';

const now = Date.now();
const series = [
  { labels: { __name__: 'http_requests_total', job: 'api', code: '200' }, value: 1027 },
  { labels: { __name__: 'process_resident_memory_bytes', job: 'api' }, value: 52_428_800 },
];

// WriteRequest { repeated TimeSeries timeseries = 1 }
// TimeSeries { repeated Label labels = 1; repeated Sample samples = 2 }
// Label { string name = 1; string value = 2 }   Sample { double value = 1; int64 timestamp = 2 }
const w = protobuf.Writer.create();
for (const s of series) {
  w.uint32((1 << 3) | 2).fork();
  for (const [name, value] of Object.entries(s.labels)) {
    w.uint32((1 << 3) | 2).fork().uint32((1 << 3) | 2).string(name).uint32((2 << 3) | 2).string(value).ldelim();
  }
  w.uint32((2 << 3) | 2).fork().uint32((1 << 3) | 1).double(s.value).uint32((2 << 3) | 0).int64(now).ldelim();
  w.ldelim();
}
process.stdout.write(snappy.compressSync(Buffer.from(w.finish())));
