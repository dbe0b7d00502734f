/**
 * PostgreSQL protocol 3.0 framing: a strict, bounded parser of what a client sends and the builders
 * of what the server sends. (pg-protocol, node-postgres' own, parses only server messages; this side
 * needs the other direction and a hard size bound per message, so it is written here: ~150 lines.)
 *
 * Every length is checked before it is trusted: a message longer than `maxMessageBytes`, a length
 * field smaller than itself, a string without its terminator, or fields past the end are a
 * ProtocolViolation, which the session answers with an ErrorResponse and a closed connection.
 */

export class ProtocolViolation extends Error {
  constructor(
    message: string,
    /** SQLSTATE: 08P01 protocol_violation, 54000 program_limit_exceeded. */
    readonly code = '08P01',
  ) {
    super(message);
  }
}

export const SSL_REQUEST = 80877103;
export const GSSENC_REQUEST = 80877104;
export const CANCEL_REQUEST = 80877102;
export const PROTOCOL_3 = 196608;

/** The first message of a connection: no type byte, a 4-byte length then a 4-byte code. */
export type StartupPacket =
  | { kind: 'ssl' }
  | { kind: 'gssenc' }
  | { kind: 'cancel'; pid: number; secret: number }
  | { kind: 'startup'; params: Map<string, string> };

/** A reader over one message's payload. */
export class Reader {
  private pos = 0;
  constructor(private readonly buf: Buffer) {}
  get remaining(): number {
    return this.buf.length - this.pos;
  }
  private need(n: number): void {
    if (n < 0 || this.pos + n > this.buf.length) throw new ProtocolViolation('message is shorter than its fields');
  }
  byte(): number {
    this.need(1);
    return this.buf[this.pos++];
  }
  int16(): number {
    this.need(2);
    const v = this.buf.readInt16BE(this.pos);
    this.pos += 2;
    return v;
  }
  int32(): number {
    this.need(4);
    const v = this.buf.readInt32BE(this.pos);
    this.pos += 4;
    return v;
  }
  cstring(): string {
    const end = this.buf.indexOf(0, this.pos);
    if (end < 0) throw new ProtocolViolation('string without terminator');
    const s = this.buf.toString('utf8', this.pos, end);
    this.pos = end + 1;
    return s;
  }
  bytes(n: number): Buffer {
    this.need(n);
    const b = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return b;
  }
  end(): void {
    if (this.pos !== this.buf.length) throw new ProtocolViolation('message has trailing bytes');
  }
}

export function parseStartup(payload: Buffer): StartupPacket {
  const r = new Reader(payload);
  const code = r.int32();
  if (code === SSL_REQUEST) return { kind: 'ssl' };
  if (code === GSSENC_REQUEST) return { kind: 'gssenc' };
  if (code === CANCEL_REQUEST) {
    const pid = r.int32();
    const secret = r.int32();
    return { kind: 'cancel', pid, secret };
  }
  if (code !== PROTOCOL_3) throw new ProtocolViolation(`unsupported frontend protocol ${code >> 16}.${code & 0xffff}: only 3.0 is spoken`, '0A000');
  const params = new Map<string, string>();
  for (;;) {
    const key = r.cstring();
    if (key === '') break;
    params.set(key, r.cstring());
  }
  r.end();
  return { kind: 'startup', params };
}

/**
 * Splits a byte stream into messages: `startup` for the untyped first packet(s), typed otherwise.
 * Holds at most one message's bytes (bounded by maxMessageBytes).
 */
export class Framer {
  private chunks: Buffer[] = [];
  private length = 0;
  constructor(private readonly maxMessageBytes: number) {}

  /** Bytes received and not yet taken as messages. */
  get buffered(): number {
    return this.length;
  }

  push(data: Buffer): void {
    this.chunks.push(data);
    this.length += data.length;
  }

  private peek(n: number): Buffer | undefined {
    if (this.length < n) return undefined;
    if (this.chunks[0].length < n) {
      const all = Buffer.concat(this.chunks);
      this.chunks = [all];
    }
    return this.chunks[0];
  }

  private take(n: number): Buffer {
    const head = this.peek(n)!;
    const out = head.subarray(0, n);
    if (head.length === n) this.chunks.shift();
    else this.chunks[0] = head.subarray(n);
    this.length -= n;
    return out;
  }

  /** The next untyped startup packet's payload, or undefined until it is whole. */
  nextStartup(): Buffer | undefined {
    const head = this.peek(4);
    if (!head) return undefined;
    const len = head.readInt32BE(0);
    // 8: length and code; 10 KB: PostgreSQL's own bound on a startup packet.
    if (len < 8 || len > 10_000) throw new ProtocolViolation(`invalid startup packet length ${len}`);
    if (this.length < len) return undefined;
    return Buffer.from(this.take(len).subarray(4));
  }

  /** The next typed message, or undefined until it is whole. */
  next(): { type: number; payload: Buffer } | undefined {
    const head = this.peek(5);
    if (!head) return undefined;
    const type = head[0];
    const len = head.readInt32BE(1);
    if (len < 4) throw new ProtocolViolation(`invalid message length ${len}`);
    if (len + 1 > this.maxMessageBytes) throw new ProtocolViolation(`message of ${len + 1} bytes is larger than the ${this.maxMessageBytes} accepted`, '54000');
    if (this.length < len + 1) return undefined;
    const msg = this.take(len + 1);
    return { type, payload: Buffer.from(msg.subarray(5)) };
  }
}

// ---- server messages ----

function message(type: string, body: Buffer): Buffer {
  const out = Buffer.allocUnsafe(5 + body.length);
  out[0] = type.charCodeAt(0);
  out.writeInt32BE(4 + body.length, 1);
  body.copy(out, 5);
  return out;
}

const cstr = (s: string) => Buffer.concat([Buffer.from(s, 'utf8'), Buffer.from([0])]);
const i16 = (v: number) => {
  const b = Buffer.allocUnsafe(2);
  b.writeInt16BE(v);
  return b;
};
const i32 = (v: number) => {
  const b = Buffer.allocUnsafe(4);
  b.writeInt32BE(v);
  return b;
};

export const msg = {
  authOk: () => message('R', i32(0)),
  authCleartext: () => message('R', i32(3)),
  parameterStatus: (name: string, value: string) => message('S', Buffer.concat([cstr(name), cstr(value)])),
  backendKeyData: (pid: number, secret: number) => message('K', Buffer.concat([i32(pid), i32(secret)])),
  readyForQuery: (status: 'I' | 'T' | 'E') => message('Z', Buffer.from(status)),
  commandComplete: (tag: string) => message('C', cstr(tag)),
  emptyQuery: () => message('I', Buffer.alloc(0)),
  parseComplete: () => message('1', Buffer.alloc(0)),
  bindComplete: () => message('2', Buffer.alloc(0)),
  closeComplete: () => message('3', Buffer.alloc(0)),
  noData: () => message('n', Buffer.alloc(0)),
  portalSuspended: () => message('s', Buffer.alloc(0)),
  /** CopyOutResponse: text (0) for the whole copy and each of `columns`. */
  copyOutResponse: (columns: number) => message('H', Buffer.concat([Buffer.from([0]), i16(columns), ...Array.from({ length: columns }, () => i16(0))])),
  copyData: (text: string) => message('d', Buffer.from(text, 'utf8')),
  copyDone: () => message('c', Buffer.alloc(0)),
  parameterDescription: (oids: number[]) => message('t', Buffer.concat([i16(oids.length), ...oids.map(i32)])),
  rowDescription: (fields: { name: string; oid: number; size: number; format: number }[]) =>
    message(
      'T',
      Buffer.concat([
        i16(fields.length),
        // table oid 0, column attnum 0, type modifier -1: computed columns, as PostgreSQL describes them.
        ...fields.flatMap((f) => [cstr(f.name), i32(0), i16(0), i32(f.oid), i16(f.size), i32(-1), i16(f.format)]),
      ]),
    ),
  /** A single DataRow of text values (server-generated answers: SHOW, canned rows). */
  dataRowText: (values: (string | null)[]) =>
    message('D', Buffer.concat([i16(values.length), ...values.map((v) => (v === null ? i32(-1) : Buffer.concat([i32(Buffer.byteLength(v)), Buffer.from(v, 'utf8')])))])),
  error: (severity: 'ERROR' | 'FATAL', code: string, text: string) => notice('E', severity, code, text),
  notice: (code: string, text: string) => notice('N', 'NOTICE', code, text),
};

function notice(type: 'E' | 'N', severity: string, code: string, text: string): Buffer {
  return message(type, Buffer.concat([Buffer.from('S'), cstr(severity), Buffer.from('V'), cstr(severity), Buffer.from('C'), cstr(code), Buffer.from('M'), cstr(text), Buffer.from([0])]));
}

/** Splits a buffer of whole DataRow messages after `rows` of them (portal row limits). */
export function splitRows(data: Buffer, rows: number): [Buffer, Buffer] {
  let pos = 0;
  for (let i = 0; i < rows && pos < data.length; i++) pos += 1 + data.readInt32BE(pos + 1);
  return [data.subarray(0, pos), data.subarray(pos)];
}

/** A Parse message's body. */
export function readParse(r: Reader): { name: string; sql: string; paramTypes: number[] } {
  const name = r.cstring();
  const sql = r.cstring();
  const n = r.int16();
  if (n < 0) throw new ProtocolViolation('negative parameter type count');
  const paramTypes: number[] = [];
  for (let i = 0; i < n; i++) paramTypes.push(r.int32());
  r.end();
  return { name, sql, paramTypes };
}

/** A count of 16-bit items, then the items (format codes). */
function int16List(r: Reader, what: string): number[] {
  const n = r.int16();
  if (n < 0) throw new ProtocolViolation(`negative ${what} count`);
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(r.int16());
  return out;
}

/** A Bind message's body, its format codes checked. */
export function readBind(r: Reader): { portal: string; name: string; formats: number[]; values: (Buffer | null)[]; resultFormats: number[] } {
  const portal = r.cstring();
  const name = r.cstring();
  const formats = int16List(r, 'format');
  const nValues = r.int16();
  if (nValues < 0) throw new ProtocolViolation('negative parameter count');
  const values: (Buffer | null)[] = [];
  for (let i = 0; i < nValues; i++) {
    const len = r.int32();
    values.push(len === -1 ? null : r.bytes(len));
  }
  const resultFormats = int16List(r, 'result format');
  r.end();
  for (const f of [...formats, ...resultFormats]) if (f !== 0 && f !== 1) throw new ProtocolViolation(`invalid format code ${f}`);
  return { portal, name, formats, values, resultFormats };
}
