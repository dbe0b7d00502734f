import * as path from 'node:path';
import protobuf from 'protobufjs';
import snappy from 'snappy';
import { HttpError, badRequest } from '../../http/errors.ts';

// protobufjs 8 rejects a whole message when one proto3 string is not valid UTF-8. A label value with
// a stray byte should not cost the batch it came in: read strings leniently (invalid bytes become
// U+FFFD), as Prometheus' own Go decoder does.
for (const reader of [protobuf.Reader, protobuf.BufferReader]) {
  const proto = reader.prototype as unknown as { string: () => string; stringVerify?: () => string };
  proto.stringVerify = proto.string;
}

const here = import.meta.dirname;
export const v1Root = protobuf.loadSync(path.join(here, 'remote.proto'));
export const v2Root = protobuf.loadSync(path.join(here, 'remote_v2.proto'));
export const WriteRequestV1 = v1Root.lookupType('prometheus.WriteRequest');
export const RequestV2 = v2Root.lookupType('io.prometheus.write.v2.Request');

/** Prometheus' staleness marker: a NaN with this exact bit pattern (value.StaleNaN). */
export const STALE_NAN_BITS = 0x7ff0000000000002n;

export interface DecodedSample {
  value: number;
  timestamp: number | Long;
  stale: boolean;
}
type Long = { low: number; high: number; unsigned?: boolean; toNumber?: () => number };

/**
 * Sample.value is read from its raw 8 bytes as well, because a JS number cannot be trusted to keep a
 * NaN's payload, and the payload is what tells a staleness marker from an ordinary NaN.
 */
function installSampleDecoder(type: protobuf.Type): void {
  const decode = (reader: protobuf.Reader | Uint8Array, length?: number): DecodedSample => {
    const r = reader instanceof protobuf.Reader ? reader : protobuf.Reader.create(reader);
    const end = length === undefined ? r.len : r.pos + length;
    const out: DecodedSample = { value: 0, timestamp: 0, stale: false };
    while (r.pos < end) {
      const tag = r.uint32();
      if (tag === 0x09) {
        const bits = Buffer.from(r.buf.buffer, r.buf.byteOffset + r.pos, 8).readBigUInt64LE(0);
        out.stale = bits === STALE_NAN_BITS;
        out.value = r.double();
      } else if (tag === 0x10) {
        out.timestamp = r.int64() as unknown as number | Long;
      } else {
        r.skipType(tag & 7);
      }
    }
    return out;
  };
  // Set every type up first: setting up a message type (re)generates the decoders of the types it uses.
  const setupAll = (ns: protobuf.NamespaceBase) => {
    for (const t of ns.nestedArray) {
      if (t instanceof protobuf.Type) t.setup();
      if (t instanceof protobuf.Namespace || t instanceof protobuf.Type) setupAll(t as protobuf.NamespaceBase);
    }
  };
  setupAll(type.root);
  (type as unknown as { decode: typeof decode }).decode = decode;
}
installSampleDecoder(v1Root.lookupType('prometheus.Sample'));
installSampleDecoder(v2Root.lookupType('io.prometheus.write.v2.Sample'));

/** int64/uint64 from protobufjs (number or Long) → number (exact below 2^53, as timestamps in ms are). */
export function toNumber(v: number | Long | null | undefined): number {
  if (v === null || v === undefined) return 0;
  if (typeof v === 'number') return v;
  if (v.toNumber) return v.toNumber();
  return v.high * 2 ** 32 + (v.low >>> 0);
}

/**
 * Body → WriteRequest bytes. Snappy's block format starts with the uncompressed length as a varint,
 * checked against the limit before anything is inflated, so a small body cannot claim gigabytes.
 */
export function uncompress(body: Buffer, contentEncoding: string | undefined, maxBytes: number): Buffer {
  const encoding = (contentEncoding ?? '').trim().toLowerCase();
  if (encoding !== 'snappy') {
    throw badRequest(`remote write bodies must be snappy-compressed: send Content-Encoding: snappy (got "${contentEncoding ?? ''}")`);
  }
  let declared = 0;
  let shift = 0;
  let i = 0;
  for (; i < body.length && i < 5; i++) {
    declared += (body[i] & 0x7f) * 2 ** shift;
    shift += 7;
    if ((body[i] & 0x80) === 0) break;
  }
  if (i >= body.length || i >= 5) throw badRequest('body is not valid snappy: truncated length header');
  if (declared > maxBytes) throw new HttpError(413, `decompressed request body would be ${declared} bytes, over the limit of ${maxBytes}`);
  try {
    return snappy.uncompressSync(body, { asBuffer: true }) as Buffer;
  } catch (err) {
    throw badRequest(`body is not valid snappy: ${(err as Error).message}`);
  }
}
