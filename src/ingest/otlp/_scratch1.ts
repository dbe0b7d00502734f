import root from '@opentelemetry/otlp-transformer/build/src/generated/root.js';
const r: any = root;
const L = r.opentelemetry.proto.collector.logs.v1.ExportLogsServiceRequest;
const m = L.fromObject({resourceLogs:[{scopeLogs:[{logRecords:[{timeUnixNano:'1790000000123456789', body:{stringValue:'hi'}, severityNumber: 9, traceId: 'AAAA'}]}]}]});
const buf = L.encode(m).finish();
const d = L.decode(buf);
const lr = d.resourceLogs[0].scopeLogs[0].logRecords[0];
console.log(lr, typeof lr.timeUnixNano, lr.timeUnixNano?.constructor?.name, lr.body.value, lr.observedTimeUnixNano, lr.traceId);
console.log(JSON.stringify(L.toObject(d, {longs: String})));
