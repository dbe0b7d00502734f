import * as path from 'node:path';
import protobuf from 'protobufjs';
import snappy from 'snappy';
import { invalidInput, tooLarge, unsupported } from '../../errors.ts';
import { countDecodes } from '../limits.ts';
import { decodeMessage, setupTypes } from '../protobuf.ts';

const here = import.meta.dirname;
export const v1Root = protobuf.loadSync(path.join(here, 'remote.proto'));
export const v2Root = protobuf.loadSync(path.join(here, 'remote_v2.proto'));
export const WriteRequestV1 = v1Root.lookupType('prometheus.WriteRequest');
export const RequestV2 = v2Root.lookupType('io.prometheus.write.v2.Request');

export { decodeMessage };

/** Prometheus' staleness marker: a NaN with this exact bit pattern (value.StaleNaN). */
export const STALE_NAN_BITS = 0x7ff0000000000002n;

type Long = { low: number; high: number; unsigned?: boolean; toNumber?: () => number };
export type Int64 = number | Long;

export interface DecodedSample {
  value: number;
  timestamp: Int64;
  stale: boolean;
}

/** The 8 little-endian bytes at `at` are Prometheus' staleness NaN. */
function isStaleBits(buf: Uint8Array, at: number): boolean {
  // High word 0x7ff00000, low word 0x00000002; compared bytewise to avoid a BigInt per sample.
  return buf[at] === 0x02 && buf[at + 1] === 0 && buf[at + 2] === 0 && buf[at + 3] === 0 && buf[at + 4] === 0 && buf[at + 5] === 0 && buf[at + 6] === 0xf0 && buf[at + 7] === 0x7f;
}

/**
 * Sample.value is judged by its raw 8 bytes, because a JS number cannot be trusted to keep a NaN's
 * payload (V8 may canonicalise NaNs that pass through arithmetic or some typed-array paths), and the
 * payload is what tells a staleness marker from an ordinary NaN.
 */
function installSampleDecoder(type: protobuf.Type): void {
  const decode = (reader: protobuf.Reader | Uint8Array, length?: number): DecodedSample => {
    const r = reader instanceof protobuf.Reader ? reader : protobuf.Reader.create(reader);
    const end = length === undefined ? r.len : r.pos + length;
    const out: DecodedSample = { value: 0, timestamp: 0, stale: false };
    while (r.pos < end) {
      const tag = r.uint32();
      if (tag === 0x09) {
        // field 1 (value), wire type 1 (64-bit)
        const at = r.pos;
        out.value = r.double(); // throws on a truncated field before the bytes are looked at
        out.stale = isStaleBits(r.buf, at);
      } else if (tag === 0x10) {
        // field 2 (timestamp), wire type 0 (varint)
        out.timestamp = r.int64() as unknown as Int64;
      } else {
        r.skipType(tag & 7);
      }
    }
    if (r.pos !== end) throw new Error(`Sample overruns its length by ${r.pos - end} bytes`);
    return out;
  };
  // Every type is set up first: setting up a message type replaces its decoder (src/ingest/protobuf.ts).
  setupTypes(type.root);
  // The generated TimeSeries decoder calls `types[i].decode(reader, length)` on the Type object at call
  // time, so replacing the property is enough for nested samples to come through here.
  (type as unknown as { decode: typeof decode }).decode = decode;
}
installSampleDecoder(v1Root.lookupType('prometheus.Sample'));
installSampleDecoder(v2Root.lookupType('io.prometheus.write.v2.Sample'));
// Counted against the per-request limits (src/ingest/limits.ts): samples and histograms are records,
// label names the distinct names, the packed lists' elements values.
for (const root of [v1Root, v2Root]) {
  countDecodes(root, {
    records: new Set(['Sample', 'Histogram']),
    packed: {
      Histogram: ['negativeDeltas', 'negativeCounts', 'positiveDeltas', 'positiveCounts', 'customValues'],
      TimeSeries: ['labelsRefs'],
      Exemplar: ['labelsRefs'],
      Request: ['symbols'],
    },
    names: { Label: 'name' },
  });
}

/** int64/uint64 from protobufjs (number or Long) → number (exact below 2^53, as timestamps in ms are). */
export function toNumber(v: Int64 | null | undefined): number {
  if (v === null || v === undefined) return 0;
  if (typeof v === 'number') return v;
  if (v.toNumber) return v.toNumber();
  return (v.unsigned ? v.high >>> 0 : v.high) * 2 ** 32 + (v.low >>> 0);
}

/**
 * Body → WriteRequest bytes. Snappy's block format starts with the uncompressed length as a varint,
 * checked against the limit before anything is inflated, so a small body cannot claim gigabytes.
 *
 * A missing Content-Encoding is 400: remote write 1.0 requires snappy, and a request without the
 * header is malformed rather than an alternative a sender could negotiate. A named other encoding
 * (gzip, zstd…) is 415, which the 2.0 spec reserves for "encoding not supported" so that a sender may
 * retry with another one.
 */
export function uncompress(body: Buffer, contentEncoding: string | undefined, maxBytes: number): Buffer {
  const encoding = (contentEncoding ?? '').trim().toLowerCase();
  if (encoding === '') throw invalidInput('remote write bodies must be snappy-compressed: send Content-Encoding: snappy');
  if (encoding !== 'snappy') throw unsupported(`unsupported Content-Encoding "${contentEncoding}" for remote write: only snappy is accepted`);
  // A snappy block's length is a uint32 varint: at most 5 bytes.
  let declared = 0;
  let i = 0;
  for (;; i++) {
    if (i >= body.length) throw invalidInput('body is not valid snappy: truncated length header');
    if (i >= 5) throw invalidInput('body is not valid snappy: length header is longer than 5 bytes');
    declared += (body[i] & 0x7f) * 2 ** (7 * i);
    if ((body[i] & 0x80) === 0) break;
  }
  if (declared > maxBytes) throw tooLarge(`decompressed request body would be ${declared} bytes, over the limit of ${maxBytes}`);
  try {
    return snappy.uncompressSync(body, { asBuffer: true }) as Buffer;
  } catch (err) {
    throw invalidInput(`body is not valid snappy: ${(err as Error).message}`);
  }
}
