/**
 * Raw PostgreSQL frontend messages, for the cases no client library produces on purpose (a portal left
 * suspended inside a transaction block, CancelRequest, malformed input).
 */
export const frame = (type: string, body: Buffer): Buffer => {
  const head = Buffer.alloc(5);
  head[0] = type.charCodeAt(0);
  head.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
};

export const cstr = (s: string): Buffer => Buffer.from(`${s}\0`);

export const int16 = (v: number): Buffer => {
  const b = Buffer.alloc(2);
  b.writeInt16BE(v);
  return b;
};

export const int32 = (v: number): Buffer => {
  const b = Buffer.alloc(4);
  b.writeInt32BE(v);
  return b;
};
