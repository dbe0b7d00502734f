/**
 * Loki's push API body (protobuf + snappy from Promtail, Alloy and the Docker driver; JSON from
 * language loggers), bytes in, JSON events out: one event per log line, its stream labels and
 * structured metadata as fields, the line as `line`, its nanosecond timestamp as `timestamp` (ISO,
 * nanoseconds kept in the text). Any error refuses the whole request: Loki stores a push whole or not.
 */
import * as path from 'node:path';
import protobuf from 'protobufjs';
import snappy from 'snappy';
import { z } from 'zod';
import { invalidInput, tooLarge } from '../../errors.ts';
import { declaredDecodedSize } from '../compression.ts';
import { decodeMessage, setupTypes } from '../protobuf.ts';

/** The time field of Loki events. */
export const LOKI_TIME_FIELD = 'timestamp';
/** The column holding the log line. */
export const LOKI_LINE_FIELD = 'line';

const root = protobuf.loadSync(path.join(import.meta.dirname, 'push.proto'));
setupTypes(root);
const PushRequest = root.lookupType('logproto.PushRequest');

interface Entry {
  ns: bigint;
  line: string;
  metadata: [string, string][];
}

/** Escapes of a quoted label value (Go's strconv.Quote, as Prometheus writes them); others stand for the character. */
const ESCAPES: Record<string, string> = { n: '\n', t: '\t', r: '\r' };

/** A stream's label set in Prometheus' text form, `{job="app", level="info"}`, as pairs. */
export function parseLabels(text: string): [string, string][] {
  const t = text.trim();
  if (!t.startsWith('{') || !t.endsWith('}')) throw invalidInput(`stream labels ${JSON.stringify(t.slice(0, 100))} are not of the form {name="value", …}`);
  const out: [string, string][] = [];
  const pair = /\s*([A-Za-z_][A-Za-z0-9_.]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(,|$)/y;
  const inner = t.slice(1, -1);
  pair.lastIndex = 0;
  while (pair.lastIndex < inner.length) {
    const m = pair.exec(inner);
    if (!m) throw invalidInput(`stream labels ${JSON.stringify(t.slice(0, 100))} could not be parsed`);
    out.push([m[1], m[2].replace(/\\(.)/g, (_, ch: string) => ESCAPES[ch] ?? ch)]);
  }
  return out;
}

/** Nanoseconds since the epoch as RFC 3339 with all nine fraction digits. */
export function nanosToIso(ns: bigint): string {
  const ms = ns / 1_000_000n;
  const base = new Date(Number(ms)).toISOString();
  const frac = (((ns % 1_000_000_000n) + 1_000_000_000n) % 1_000_000_000n).toString().padStart(9, '0');
  return `${base.slice(0, 19)}.${frac}Z`;
}

function event(labels: [string, string][], e: Entry): string {
  const row: Record<string, string> = {};
  for (const [k, v] of labels) row[k] = v;
  for (const [k, v] of e.metadata) row[k] = v;
  row[LOKI_LINE_FIELD] = e.line;
  row[LOKI_TIME_FIELD] = nanosToIso(e.ns);
  return JSON.stringify(row);
}

const JsonPush = z.object({
  streams: z.array(
    z.object({
      stream: z.record(z.string(), z.string()).default({}),
      values: z.array(z.union([z.tuple([z.string().regex(/^\d{1,20}$/), z.string()]), z.tuple([z.string().regex(/^\d{1,20}$/), z.string(), z.record(z.string(), z.string())])])),
    }),
  ),
});

function fromJson(body: Buffer): string[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch (err) {
    throw invalidInput(`malformed JSON push request: ${(err as Error).message}`);
  }
  const r = JsonPush.safeParse(parsed);
  if (!r.success) throw invalidInput(`not a Loki push request: ${r.error.issues[0].path.join('.')}: ${r.error.issues[0].message}`);
  return r.data.streams.flatMap((s) => {
    const labels = Object.entries(s.stream);
    return s.values.map((v) => event(labels, { ns: BigInt(v[0]), line: v[1], metadata: Object.entries(v[2] ?? {}) }));
  });
}

interface ProtoStream {
  labels?: string;
  entries?: { timestamp?: { seconds?: protobuf.Long | number; nanos?: number }; line?: string; structuredMetadata?: { name?: string; value?: string }[] }[];
}

function fromProtobuf(bytes: Buffer): string[] {
  let msg: { streams?: ProtoStream[] };
  try {
    msg = decodeMessage(PushRequest, bytes) as unknown as { streams?: ProtoStream[] };
  } catch (err) {
    throw invalidInput(`malformed protobuf push request: ${(err as Error).message}`);
  }
  return (msg.streams ?? []).flatMap((s) => {
    const labels = parseLabels(s.labels ?? '');
    return (s.entries ?? []).map((e) => {
      const ns = BigInt(String(e.timestamp?.seconds ?? 0)) * 1_000_000_000n + BigInt(e.timestamp?.nanos ?? 0);
      return event(labels, { ns, line: e.line ?? '', metadata: (e.structuredMetadata ?? []).map((p) => [p.name ?? '', p.value ?? '']) });
    });
  });
}

/**
 * Decodes a push body: JSON when Content-Type says so, else snappy-compressed protobuf (Loki's
 * default; a body whose Content-Encoding was gzip arrives here already inflated, uncompressed then).
 */
export function decodePush(body: Buffer, contentType: string | undefined, maxBytes: number): string[] {
  if (/json/i.test(contentType ?? '')) return fromJson(body);
  // The snappy block states its length first: a bomb is refused before anything is inflated.
  const declared = declaredDecodedSize(body, 'snappy');
  if (declared === undefined) throw invalidInput('push request is not snappy-compressed protobuf: no snappy length header');
  if (declared > maxBytes) throw tooLarge(`decompressed push request would be ${declared} bytes, over the limit of ${maxBytes}`);
  let bytes: Buffer;
  try {
    bytes = snappy.uncompressSync(body, { asBuffer: true }) as Buffer;
  } catch (err) {
    throw invalidInput(`push request is not snappy-compressed protobuf: ${(err as Error).message}`);
  }
  return fromProtobuf(bytes);
}
