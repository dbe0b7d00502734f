/**
 * The Tempo door's wire encoding of a trace: the traces store's OTLP/JSON `TracesData` (the one mapping,
 * src/query/traces/otlp.ts) as OTLP protobuf, through the service's own OTLP types. Encoding stays in the
 * door: only Tempo answers protobuf (Grafana's backend asks for it), the bytes are a wire concern like the
 * JSON envelopes, and the query layer may not import the OTLP codec of the ingest side.
 */
import { requestClass } from '../../ingest/otlp/generated.ts';
import type { OtlpTracesData } from '../../query/traces/otlp.ts';

const hex = (h: string | undefined) => (h ? Buffer.from(h, 'hex') : Buffer.alloc(0));

/** The trace as protobuf `TracesData` bytes (ids as bytes, where the JSON mapping has hex). */
export function tracesDataProto(data: OtlpTracesData): Uint8Array {
  const binary = {
    resourceSpans: data.resourceSpans.map((rs) => ({
      ...rs,
      scopeSpans: rs.scopeSpans.map((ss) => ({
        ...ss,
        spans: ss.spans.map((s) => ({
          ...s,
          traceId: hex(s.traceId),
          spanId: hex(s.spanId),
          parentSpanId: hex(s.parentSpanId),
          links: s.links?.map((l) => ({ ...l, traceId: hex(l.traceId), spanId: hex(l.spanId) })),
        })),
      })),
    })),
  };
  const cls = requestClass.traces;
  return cls.encode(cls.fromObject(binary)).finish();
}

/** Tempo's TraceByIDResponse (v2): the trace in field 1. */
export function traceByIdResponseProto(trace: Uint8Array): Uint8Array {
  const len: number[] = [];
  let n = trace.length;
  do {
    len.push((n & 0x7f) | (n > 0x7f ? 0x80 : 0));
    n >>>= 7;
  } while (n > 0);
  return Buffer.concat([Buffer.from([0x0a, ...len]), trace]);
}
