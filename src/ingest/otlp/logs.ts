import type { ColumnType, FlatRow } from '../../model.ts';
import { bodyCell } from './attributes.ts';
import { COMMON_KNOWN_TYPES, forEachRecord, startRow } from './common.ts';
import { enumNumber, id, int, str, timeColumn, type ConvertContext, type Msg } from './values.ts';

export const LOGS_TIME_COLUMN = 'time_unix_nano';

export const LOGS_KNOWN_TYPES: Record<string, ColumnType> = {
  ...COMMON_KNOWN_TYPES,
  time_unix_nano: 'TIMESTAMP_NS',
  observed_time_unix_nano: 'TIMESTAMP_NS',
  severity_number: 'BIGINT',
  severity_text: 'VARCHAR',
  body: 'VARCHAR',
  trace_id: 'VARCHAR',
  span_id: 'VARCHAR',
  flags: 'BIGINT',
  dropped_attributes_count: 'BIGINT',
  event_name: 'VARCHAR',
};

const SEVERITY_LEVELS = ['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR', 'FATAL'];
/** SeverityNumber names by number: SEVERITY_NUMBER_UNSPECIFIED, SEVERITY_NUMBER_TRACE … SEVERITY_NUMBER_FATAL4. */
export const SEVERITY_NAMES = [
  'SEVERITY_NUMBER_UNSPECIFIED',
  ...SEVERITY_LEVELS.flatMap((level) => ['', '2', '3', '4'].map((n) => `SEVERITY_NUMBER_${level}${n}`)),
];

/** One row per LogRecord; a record with a malformed trace or span id is rejected. */
export function logRows(request: Msg, ctx: ConvertContext): FlatRow[] {
  const rows: FlatRow[] = [];
  forEachRecord(request, { resources: 'resourceLogs', scopes: 'scopeLogs', records: 'logRecords' }, ctx.rejections, (lr, shared, at) => {
    const traceId = id(lr.traceId, 16, 'trace_id');
    const spanId = id(lr.spanId, 8, 'span_id');
    const idError = traceId.error ?? spanId.error;
    if (idError !== undefined) {
      ctx.rejections.add(at, idError);
      return;
    }
    const observed = timeColumn(lr.observedTimeUnixNano, at, 'observedTimeUnixNano');
    const own = timeColumn(lr.timeUnixNano, at, 'timeUnixNano');
    const row = startRow(shared, lr, at);
    // The time column is never null: records without a time of their own are filed under the
    // time the collector saw them, or failing that, when this service received them.
    row.time_unix_nano = own ?? observed ?? ctx.receivedAt;
    row.observed_time_unix_nano = observed;
    row.severity_number = enumNumber(lr.severityNumber, SEVERITY_NAMES, at, 'severityNumber');
    row.severity_text = str(lr.severityText, at, 'severityText');
    row.body = bodyCell(lr.body, at, 'body');
    row.trace_id = traceId.hex;
    row.span_id = spanId.hex;
    row.flags = int(lr.flags, at, 'flags');
    row.dropped_attributes_count = int(lr.droppedAttributesCount, at, 'droppedAttributesCount');
    row.event_name = str(lr.eventName, at, 'eventName');
    rows.push(row);
  });
  return rows;
}
