import * as path from 'node:path';
import protobuf from 'protobufjs';
import { countDecodes } from '../limits.ts';
import { messageTypes, setupTypes } from '../protobuf.ts';

/**
 * The OTLP message types, this service's own: loaded from the .proto files of opentelemetry-proto
 * v1.7.0 kept in ./proto (the version @opentelemetry/otlp-transformer 0.210 generated its classes
 * from). Our own root, not the transformer's generated classes: those live in protobufjs' process-wide
 * `roots.default`, and counting decodes for the per-request limits means wrapping each type's decoder.
 */
const protoDir = path.join(import.meta.dirname, 'proto');

/**
 * Loads the types on first use, not at import: parsing the .proto files and setting up their decoders
 * costs ~60 ms of CPU, which every ingest worker thread paid at start even when it only ever decodes
 * JSON (measured: 90 → 30 ms to import this module).
 */
function load(): protobuf.Root {
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => path.join(protoDir, target);
  root.loadSync(['logs', 'trace', 'metrics'].map((s) => `opentelemetry/proto/collector/${s}/v1/${s}_service.proto`));
  setupTypes(root);
  // Unset fields read as the classes protobufjs' static code generator makes them (what the row builders
  // were written against): a member of a oneof (AnyValue's kinds, proto3 `optional`) that is not set is
  // null, not its type's zero value, and an unset bytes field (trace and span ids) an empty Buffer.
  for (const t of messageTypes(root)) {
    const proto = t.ctor.prototype as unknown as Record<string, unknown>;
    for (const f of t.fieldsArray) {
      if (f.repeated || f.map) continue;
      if (f.partOf) proto[f.name] = null;
      else if (f.type === 'bytes') proto[f.name] = Buffer.alloc(0);
    }
  }
  // Every message counts as a value, records as events, the packed lists' elements as values, attribute
  // keys as names (src/ingest/limits.ts).
  countDecodes(root, {
    records: new Set(['LogRecord', 'Span', 'NumberDataPoint', 'HistogramDataPoint', 'ExponentialHistogramDataPoint', 'SummaryDataPoint']),
    packed: { HistogramDataPoint: ['bucketCounts', 'explicitBounds'], Buckets: ['bucketCounts'] },
    names: { KeyValue: 'key' },
  });
  return root;
}

let root: protobuf.Root | undefined;

/** The part of a protobufjs message type this service uses. */
export interface MessageClass {
  decode(data: Uint8Array): object;
  encode(message: object): { finish(): Uint8Array };
  fromObject(object: object): object;
  toObject(message: object, options?: Record<string, unknown>): Record<string, unknown>;
}

type Signal = 'logs' | 'traces' | 'metrics';

/** One message class per signal, each looked up (and the types loaded) when first used. */
function classes(names: Record<Signal, string>): Record<Signal, protobuf.Type> {
  const out = {} as Record<Signal, protobuf.Type>;
  for (const signal of Object.keys(names) as Signal[]) {
    let cls: protobuf.Type | undefined;
    Object.defineProperty(out, signal, {
      enumerable: true,
      get: () => (cls ??= (root ??= load()).lookupType(`opentelemetry.proto.collector.${names[signal]}`)),
    });
  }
  return out;
}

export const requestClass: Record<Signal, MessageClass & protobuf.Type> = classes({
  logs: 'logs.v1.ExportLogsServiceRequest',
  traces: 'trace.v1.ExportTraceServiceRequest',
  metrics: 'metrics.v1.ExportMetricsServiceRequest',
});

export const responseClass: Record<Signal, MessageClass & protobuf.Type> = classes({
  logs: 'logs.v1.ExportLogsServiceResponse',
  traces: 'trace.v1.ExportTraceServiceResponse',
  metrics: 'metrics.v1.ExportMetricsServiceResponse',
});
