/**
 * Request bodies written field by field, so that tests can put any bytes where a protobuf string goes
 * (invalid UTF-8, NUL, …): what a broken or hostile client can send, which protobufjs' own encoder
 * would never produce from a JS string.
 */
import protobuf from 'protobufjs';
import snappy from 'snappy';

export type Bytes = Uint8Array;
const utf8 = (s: string | Bytes): Bytes => (typeof s === 'string' ? Buffer.from(s, 'utf8') : s);

/** A deterministic PRNG (mulberry32), so a failing fuzz case can be replayed from its seed. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const LEN = 2;
const tag = (w: protobuf.Writer, field: number, wire: number) => w.uint32((field << 3) | wire);
const bytesField = (w: protobuf.Writer, field: number, b: string | Bytes) => tag(w, field, LEN).bytes(utf8(b));
const message = (w: protobuf.Writer, field: number, body: (w: protobuf.Writer) => void) => {
  tag(w, field, LEN).fork();
  body(w);
  w.ldelim();
};

export type AttrValue = { string: string | Bytes } | { int: number } | { double: number } | { bool: boolean };
export interface LogRecordSpec {
  timeMs: number;
  body?: string | Bytes;
  attributes: [key: string | Bytes, value: AttrValue][];
}

function anyValue(w: protobuf.Writer, field: number, v: AttrValue): void {
  message(w, field, (m) => {
    if ('string' in v) bytesField(m, 1, v.string);
    else if ('bool' in v) tag(m, 2, 0).bool(v.bool);
    else if ('int' in v) tag(m, 3, 0).int64(v.int);
    else tag(m, 4, 1).double(v.double);
  });
}

/** ExportLogsServiceRequest with one resource and scope (field numbers from the OTLP .proto files). */
export function otlpLogsProtobuf(records: LogRecordSpec[]): Buffer {
  const w = protobuf.Writer.create();
  message(w, 1, (rl) =>
    message(rl, 2, (sl) => {
      for (const r of records) {
        message(sl, 2, (lr) => {
          tag(lr, 1, 1).fixed64(String(BigInt(r.timeMs) * 1_000_000n) as unknown as number);
          if (r.body !== undefined) anyValue(lr, 5, { string: r.body });
          for (const [key, value] of r.attributes) {
            message(lr, 6, (kv) => {
              bytesField(kv, 1, key);
              anyValue(kv, 2, value);
            });
          }
        });
      }
    }),
  );
  return Buffer.from(w.finish());
}

/** The same records as OTLP/JSON text (strings only; JSON cannot carry raw bytes in a string). */
export function otlpLogsJson(records: { timeMs: number; body?: string; attributes: [string, AttrValue][] }[]): string {
  const value = (v: AttrValue) =>
    'string' in v ? { stringValue: v.string } : 'bool' in v ? { boolValue: v.bool } : 'int' in v ? { intValue: String(v.int) } : { doubleValue: v.double };
  return JSON.stringify({
    resourceLogs: [
      {
        scopeLogs: [
          {
            logRecords: records.map((r) => ({
              timeUnixNano: String(BigInt(r.timeMs) * 1_000_000n),
              ...(r.body !== undefined ? { body: { stringValue: r.body } } : {}),
              attributes: r.attributes.map(([key, v]) => ({ key, value: value(v) })),
            })),
          },
        ],
      },
    ],
  });
}

export interface SeriesSpec {
  labels: [name: string | Bytes, value: string | Bytes][];
  samples: { value: number; timestampMs: number }[];
}

/** Remote write 1.0 MetricMetadata: `type` is the MetricType number (1 counter, 2 gauge, 3 histogram, 5 summary…). */
export interface MetadataSpec {
  type: number;
  family: string | Bytes;
  help?: string | Bytes;
  unit?: string | Bytes;
}

/** Remote write 1.0 WriteRequest, snappy-compressed; with `metadata` and no series, what Prometheus sends every metadata_config.send_interval. */
export function remoteWriteV1(series: SeriesSpec[], metadata: MetadataSpec[] = []): Buffer {
  const w = protobuf.Writer.create();
  for (const m of metadata) {
    message(w, 3, (md) => {
      tag(md, 1, 0).int32(m.type);
      bytesField(md, 2, m.family);
      if (m.help !== undefined) bytesField(md, 4, m.help);
      if (m.unit !== undefined) bytesField(md, 5, m.unit);
    });
  }
  for (const s of series) {
    message(w, 1, (ts) => {
      for (const [name, value] of s.labels) {
        message(ts, 1, (l) => {
          bytesField(l, 1, name);
          bytesField(l, 2, value);
        });
      }
      for (const x of s.samples) {
        message(ts, 2, (sm) => {
          tag(sm, 1, 1).double(x.value);
          tag(sm, 2, 0).int64(x.timestampMs);
        });
      }
    });
  }
  return snappy.compressSync(Buffer.from(w.finish()));
}

export const REMOTE_WRITE_V2 = 'application/x-protobuf;proto=io.prometheus.write.v2.Request';

/** Remote write 2.0 Request (symbols table + label references), snappy-compressed. */
export function remoteWriteV2(series: SeriesSpec[]): Buffer {
  const symbols: Bytes[] = [new Uint8Array(0)];
  const index = new Map<string, number>();
  const ref = (s: string | Bytes) => {
    const b = utf8(s);
    const k = Buffer.from(b).toString('hex');
    let i = index.get(k);
    if (i === undefined) {
      i = symbols.length;
      symbols.push(b);
      index.set(k, i);
    }
    return i;
  };
  const w = protobuf.Writer.create();
  const refs = series.map((s) => s.labels.flatMap(([n, v]) => [ref(n), ref(v)]));
  for (const s of symbols) bytesField(w, 4, s);
  series.forEach((s, i) => {
    message(w, 5, (ts) => {
      tag(ts, 1, LEN).fork();
      for (const r of refs[i]) ts.uint32(r);
      ts.ldelim();
      for (const x of s.samples) {
        message(ts, 2, (sm) => {
          tag(sm, 1, 1).double(x.value);
          tag(sm, 2, 0).int64(x.timestampMs);
        });
      }
    });
  });
  return snappy.compressSync(Buffer.from(w.finish()));
}
