/**
 * OTLP log records → WAL lines without building a row object per record: the common case of
 * `logRows` + placement + serialisation (src/ingest/worker/pipeline.ts) in one pass. What every record of a
 * scope shares (resource and scope attributes, the resource/scope columns, `p_timestamp`) is serialised
 * once per scope; each record adds its own columns and attributes. The type summary comes out in the
 * order the row path's `summarizeTypes` would give it (the order columns are added to the schema).
 *
 * Anything out of the ordinary returns undefined, and the caller takes the row path, which stores the
 * same request exactly as before: an invalid or rejected record (the row path then reports it in its own
 * words), an attribute that goes to the overflow column, an attribute named like a column the service
 * fills or like another attribute of the same record, an integer-like key (JavaScript orders those first
 * in an object, hence in the row path's summary), more names than the request may hold.
 */
import { COMMON_KNOWN_TYPES, forEachRecord, type Shared } from './common.ts';
import { anyValueToCell, bodyCell } from './attributes.ts';
import { LOGS_KNOWN_TYPES, SEVERITY_NAMES } from './logs.ts';
import { enumNumber, id, int, list, msg, Rejections, str, timeColumn, type IdResult, type Msg } from './values.ts';
import { checkFieldCount } from '../limits.ts';
import { fixLoneSurrogates, isServiceName } from '../names.ts';
import { ownBytes } from '../worker/lines.ts';
import { inferType, OVERFLOW, type ColumnType, type FlatValue, type TimeRange, type TypeSummary } from '../../model.ts';

export interface LogLines {
  /** One JSON line per record, each ending in '\n', as UTF-8 in an ArrayBuffer of its own (it can be transferred). */
  lines: Uint8Array;
  rows: number;
  types: TypeSummary;
  /** The range of `time_unix_nano`, epoch ms (the flush writes a batch spanning a few minutes straight from the WAL). */
  timeRange?: TimeRange;
}

/** Thrown inside the walk to leave it for the row path. */
const BAIL = new Error('row path');

const LONE_SURROGATE_START = Buffer.from('\\ud');

/** Names an attribute may not have on this path: every column the record itself or its scope defines, and `p_timestamp`. */
const COLUMNS: ReadonlySet<string> = new Set([...Object.keys(LOGS_KNOWN_TYPES), 'p_timestamp']);
/** A key JavaScript keeps in numeric order ahead of the others (an array index). */
const INDEX_LIKE = /^(?:0|[1-9]\d{0,9})$/;

/** Record columns in the row path's order, after the fixed (resource and scope) columns. */
const RECORD_COLUMNS = ['time_unix_nano', 'observed_time_unix_nano', 'severity_number', 'severity_text', 'body', 'trace_id', 'span_id', 'flags', 'dropped_attributes_count', 'event_name'] as const;
const FIXED_COLUMNS = Object.keys(COMMON_KNOWN_TYPES);

/** A value as JSON text, as the row path's `rowToJsonLine` writes it (non-finite doubles as the strings DuckDB casts back). */
function valueText(v: FlatValue): string {
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'number') return Number.isFinite(v) ? `${v}` : Number.isNaN(v) ? '"NaN"' : v > 0 ? '"Infinity"' : '"-Infinity"';
  return JSON.stringify(v);
}

/** Adds a (name, type) to the summary, keeping first-seen order. */
function note(types: TypeSummary, name: string, type: ColumnType): void {
  const seen = types.get(name);
  if (seen === undefined) types.set(name, [type]);
  else if (!seen.includes(type)) seen.push(type);
}

/** Whether a key can go on this path; see the module comment. */
const plainKey = (key: string) => key !== '' && !isServiceName(key) && !COLUMNS.has(key) && !INDEX_LIKE.test(key);

/**
 * Lines written as UTF-8 into one growing buffer: writing each line as it is made measured ~1.5× faster
 * than joining them into one string (whose many pieces are flattened first) and encoding that, and the
 * part every record of a scope shares is encoded once and copied (~8% less for the whole transform).
 */
class Utf8Out {
  private buf: Buffer;
  private length = 0;

  constructor(capacity: number) {
    this.buf = Buffer.allocUnsafe(capacity);
  }

  /** Bytes already encoded (what a scope's records share), copied as they are. */
  copy(b: Buffer): void {
    this.room(b.length);
    this.length += b.copy(this.buf, this.length);
  }

  write(s: string): void {
    // A UTF-16 unit is at most 3 bytes of UTF-8: with that much room, write never cuts the string short.
    this.room(s.length * 3);
    this.length += this.buf.write(s, this.length);
  }

  private room(bytes: number): void {
    if (this.buf.length - this.length >= bytes) return;
    const grown = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.length + bytes));
    this.buf.copy(grown, 0, 0, this.length);
    this.buf = grown;
  }

  /** The bytes written, in an ArrayBuffer of their own (never Node's shared pool). */
  bytes(): Buffer {
    const out = Buffer.allocUnsafeSlow(this.length);
    this.buf.copy(out, 0, 0, this.length);
    return out;
  }
}

/**
 * An id that is already what `id` makes of it (lowercase hex of its length), checked without a regex;
 * undefined for anything else, which `id` then reads.
 */
function lowerHex(v: unknown, digits: number): IdResult | undefined {
  if (typeof v !== 'string' || v.length !== digits) return undefined;
  for (let i = 0; i < digits; i++) {
    const c = v.charCodeAt(i);
    if (!((c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66))) return undefined;
  }
  return { hex: v };
}

/** `YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ` (nanosToIso) → epoch ms. */
const isoMs = (iso: string) => Date.parse(`${iso.slice(0, 23)}Z`);

/** The record's attributes as `putAttributes` reads them: keys and cells in order (BAIL on anything unusual). */
function readAttributes(lr: Msg, at: string, scopeKeys: Set<string>, keys: string[], cells: (string | number | boolean)[]): void {
  keys.length = 0;
  cells.length = 0;
  const attrs = lr.attributes;
  if (attrs === null || attrs === undefined) return;
  const kvs = list(attrs, at, 'attributes');
  if (kvs.length > 0) checkFieldCount(kvs.length);
  for (let i = 0; i < kvs.length; i++) {
    const kv = msg(kvs[i], at, i);
    if (kv === null) continue;
    const key = kv.key;
    if (typeof key !== 'string') {
      if (key !== null && key !== undefined) throw BAIL;
      continue;
    }
    const value = anyValueToCell(kv.value, at, i);
    if (value === null) continue;
    if (scopeKeys.has(key) || keys.includes(key)) throw BAIL;
    keys.push(key);
    cells.push(value);
  }
}

/** A nullable string as JSON text; `quoted` when it is plain ASCII that needs no escaping (times, hex ids). */
const textOrNull = (v: string | null, plain = false) => (v === null ? 'null' : plain ? `"${v}"` : JSON.stringify(v));

/**
 * One request's lines being written: the scope's shared part (made at its first record), the record's own
 * columns and attributes, and the type summary in the row path's order.
 */
class LogLineWriter {
  readonly types: TypeSummary = new Map();
  readonly out: Utf8Out;
  rows = 0;
  minTime = '';
  maxTime = '';
  private readonly stampText: string;
  // The scope being written: its shared text and attribute names, made at its first record.
  private scope: Shared | undefined;
  private scopeBytes = Buffer.alloc(0);
  private scopeKeys = new Set<string>();
  // Record columns already in the summary (their types never change).
  private readonly noted = new Set<string>();
  private readonly keys: string[] = [];
  private readonly keyText = new Map<string, string>();
  private readonly cells: (string | number | boolean)[] = [];
  private readonly values: FlatValue[] = new Array(RECORD_COLUMNS.length);

  constructor(
    private readonly receivedAt: string,
    stamp: string,
    sizeHint: number,
  ) {
    this.out = new Utf8Out(Math.max(64 * 1024, Math.ceil(sizeHint * 1.5)));
    this.stampText = `,"p_timestamp":${JSON.stringify(stamp)}`;
  }

  record(lr: Msg, shared: Shared, at: string): void {
    const first = shared !== this.scope;
    if (first) this.startScope(shared);
    // The row path's reads in its order (any error, or a rejected record, sends the request there).
    const traceId = lowerHex(lr.traceId, 32) ?? id(lr.traceId, 16, 'trace_id');
    const spanId = lowerHex(lr.spanId, 16) ?? id(lr.spanId, 8, 'span_id');
    if (traceId.error !== undefined || spanId.error !== undefined) throw BAIL;
    const observed = timeColumn(lr.observedTimeUnixNano, at, 'observedTimeUnixNano');
    const own = timeColumn(lr.timeUnixNano, at, 'timeUnixNano');
    readAttributes(lr, at, this.scopeKeys, this.keys, this.cells);
    const time = own ?? observed ?? this.receivedAt;
    const values = this.values;
    values[0] = time;
    values[1] = observed;
    values[2] = enumNumber(lr.severityNumber, SEVERITY_NAMES, at, 'severityNumber');
    values[3] = str(lr.severityText, at, 'severityText');
    values[4] = bodyCell(lr.body, at, 'body');
    values[5] = traceId.hex;
    values[6] = spanId.hex;
    values[7] = int(lr.flags, at, 'flags');
    values[8] = int(lr.droppedAttributesCount, at, 'droppedAttributesCount');
    values[9] = str(lr.eventName, at, 'eventName');
    const attrText = this.noteTypes(shared, first);
    if (this.rows === 0 || time < this.minTime) this.minTime = time;
    if (this.rows === 0 || time > this.maxTime) this.maxTime = time;
    this.write(time, observed, traceId.hex, spanId.hex, attrText);
    this.rows++;
  }

  private startScope(shared: Shared): void {
    this.scope = shared;
    this.scopeKeys = new Set();
    let scopeText = '';
    if (shared.attributes[OVERFLOW] !== undefined) throw BAIL;
    for (const key in shared.attributes) {
      if (!plainKey(key)) throw BAIL;
      this.scopeKeys.add(key);
      scopeText += `,${JSON.stringify(key)}:${valueText(shared.attributes[key])}`;
    }
    for (const key of FIXED_COLUMNS) scopeText += `,"${key}":${valueText(shared.fixed[key])}`;
    this.scopeBytes = Buffer.from(`${scopeText}${this.stampText}}\n`);
  }

  /**
   * The summary, in the order of the row's keys: shared attributes, the record's, the fixed columns, the
   * record columns, p_timestamp (what a scope shares is noted at its first record). Returns the record's
   * attributes as JSON text.
   */
  private noteTypes(shared: Shared, first: boolean): string {
    const { types, keys, cells } = this;
    if (first) for (const key of this.scopeKeys) note(types, key, inferType(shared.attributes[key])!);
    let attrText = '';
    for (let i = 0; i < keys.length; i++) {
      // A record's attribute names repeat from record to record: checked and quoted once per request.
      let quoted = this.keyText.get(keys[i]);
      if (quoted === undefined) {
        if (!plainKey(keys[i])) throw BAIL;
        this.keyText.set(keys[i], (quoted = `,${JSON.stringify(keys[i])}:`));
      }
      note(types, keys[i], inferType(cells[i])!);
      attrText += quoted + valueText(cells[i]);
    }
    if (first) for (const key of FIXED_COLUMNS) if (shared.fixed[key] !== null) note(types, key, COMMON_KNOWN_TYPES[key]);
    for (let c = 0; c < RECORD_COLUMNS.length; c++) {
      const name = RECORD_COLUMNS[c];
      if (this.values[c] !== null && !this.noted.has(name)) {
        this.noted.add(name);
        note(types, name, LOGS_KNOWN_TYPES[name]);
      }
    }
    if (this.rows === 0) note(types, 'p_timestamp', 'TIMESTAMP');
    return attrText;
  }

  private write(time: string, observed: string | null, traceId: string | null, spanId: string | null, attrText: string): void {
    const v = this.values;
    // Times and ids are plain ASCII (ISO text, lowercase hex): quoted as they are.
    this.out.write(
      `{"time_unix_nano":"${time}","observed_time_unix_nano":${textOrNull(observed, true)}` +
        `,"severity_number":${v[2]},"severity_text":${textOrNull(v[3] as string | null)}` +
        `,"body":${textOrNull(v[4] as string | null)}` +
        `,"trace_id":${textOrNull(traceId, true)},"span_id":${textOrNull(spanId, true)}` +
        `,"flags":${v[7]},"dropped_attributes_count":${v[8]},"event_name":${textOrNull(v[9] as string | null)}` +
        attrText,
    );
    this.out.copy(this.scopeBytes);
  }
}

/**
 * The lines of an ExportLogsServiceRequest, or undefined when the row path must take it. `receivedAt`:
 * the receive time as `nanosToIso` writes it (the time of a record with none); `stamp`: `p_timestamp`.
 */
export function logLines(request: Msg, receivedAt: string, stamp: string, maxNames: number, sizeHint: number): LogLines | undefined {
  const w = new LogLineWriter(receivedAt, stamp, sizeHint);
  const rejections = new Rejections();
  try {
    forEachRecord(request, { resources: 'resourceLogs', scopes: 'scopeLogs', records: 'logRecords' }, rejections, (lr, shared, at) => w.record(lr, shared, at), false);
  } catch {
    // Invalid input (a 400, a limit) is reported by the row path, in its words and order.
    return undefined;
  }
  if (rejections.count > 0 || w.types.size > maxNames) return undefined;
  const written = w.out.bytes();
  // Every string written is well-formed (the readers make values so, and a key that is not sends the
  // batch to the row path: placement cleans it), so JSON.stringify wrote no lone-surrogate escape; the
  // WAL's rule is checked all the same, on the bytes, which is cheap.
  const lines = written.indexOf(LONE_SURROGATE_START) === -1 ? written : ownBytes(fixLoneSurrogates(written.toString('utf8')));
  const { rows, types, minTime, maxTime } = w;
  return { lines, rows, types, timeRange: rows === 0 ? undefined : { minMs: isoMs(minTime), maxMs: isoMs(maxTime) } };
}
