import root from '@opentelemetry/otlp-transformer/build/src/generated/root.js';

/** The part of a protobufjs static-module message class this service uses. */
export interface MessageClass {
  decode(data: Uint8Array): object;
  encode(message: object): { finish(): Uint8Array };
  fromObject(object: object): object;
  toObject(message: object, options?: Record<string, unknown>): Record<string, unknown>;
}

interface Service {
  v1: Record<string, MessageClass>;
}

interface GeneratedRoot {
  opentelemetry: { proto: { collector: { logs: Service; trace: Service; metrics: Service } } };
}

// The package's root.d.ts declares only a generic protobufjs Root (pbts output is not shipped), so the
// generated namespaces need this narrow cast; the shapes above are what root.js defines.
const collector = (root as unknown as GeneratedRoot).opentelemetry.proto.collector;

export const requestClass = {
  logs: collector.logs.v1.ExportLogsServiceRequest,
  traces: collector.trace.v1.ExportTraceServiceRequest,
  metrics: collector.metrics.v1.ExportMetricsServiceRequest,
} as const;

export const responseClass = {
  logs: collector.logs.v1.ExportLogsServiceResponse,
  traces: collector.trace.v1.ExportTraceServiceResponse,
  metrics: collector.metrics.v1.ExportMetricsServiceResponse,
} as const;
