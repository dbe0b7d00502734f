import type { DuckDBMaterializedResult } from '@duckdb/node-api';
import { sqlString, withConnection, type DuckDBSource } from '../../duckdb.ts';
import { log } from '../../log.ts';

/*
 * The trace-id index of a traces data file: a Bloom filter of the file's distinct span_trace_id values,
 * built at flush and compaction from the file just written and kept in the file's manifest entry. A
 * trace looked up by id (Jaeger, Tempo) reads only the files whose filter may hold it, instead of every
 * file of the time window.
 *
 * Hand-written rather than a library: the filter is stored in the manifest, so its layout (below) must be
 * fixed and documented, and it is a few lines. Layout: base64 of the bit array, bit i of byte i>>3 at
 * (i & 7); K probes by double hashing (Kirsch–Mitzenmacher) of two 32-bit FNV-1a hashes of the id's
 * lower-case hex text. BITS_PER_ID = 10 and K = 7 give ~1% false positives.
 *
 * Only ever a shortcut: a file without a filter (written before it, or its filter could not be built) is
 * always read, so an answer never depends on which files have one.
 */

const BITS_PER_ID = 10;
const K = 7;
/** A file with more distinct trace ids than this goes without a filter (its manifest entry stays small). */
const MAX_IDS = 500_000;

function fnv1a(text: string, seed: number): number {
  let h = seed >>> 0;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

function* probes(id: string, bits: number): Generator<number> {
  const h1 = fnv1a(id, 0x811c9dc5);
  const h2 = fnv1a(id, 0x9747b28c) | 1;
  for (let i = 0; i < K; i++) yield ((h1 + Math.imul(i, h2)) >>> 0) % bits;
}

/** The filter of these ids, as stored (base64). */
export function buildTraceBloom(ids: string[]): string {
  const filter = emptyFilter(ids.length);
  for (const id of ids) addId(filter, id);
  return Buffer.from(filter).toString('base64');
}

/** The bit array of a filter for `count` distinct ids (at least 8 bytes). */
const emptyFilter = (count: number) => new Uint8Array(Math.max(8, Math.ceil((count * BITS_PER_ID) / 8)));

function addId(filter: Uint8Array, id: string): void {
  for (const p of probes(id.toLowerCase(), filter.length * 8)) filter[p >> 3] |= 1 << (p & 7);
}

/** Decoded filters, by their text: a lookup decodes each file's filter once. */
const decoded = new Map<string, Uint8Array>();

/** Whether a file with this filter may hold one of the ids (false: it holds none of them, for sure). */
export function bloomMayHold(bloom: string, ids: string[]): boolean {
  let bytes = decoded.get(bloom);
  if (bytes === undefined) {
    if (decoded.size >= 10_000) decoded.clear();
    decoded.set(bloom, (bytes = new Uint8Array(Buffer.from(bloom, 'base64'))));
  }
  const bits = bytes.length * 8;
  return ids.some((id) => {
    for (const p of probes(id.toLowerCase(), bits)) if ((bytes[p >> 3] & (1 << (p & 7))) === 0) return false;
    return true;
  });
}

/** The filter of a traces data file just written, or undefined (not a traces file, too many ids, or a failure). */
export async function traceBloomOf(duck: DuckDBSource, dataKey: string, dataPath: string, columns: [string, unknown][]): Promise<string | undefined> {
  if (!columns.some(([n]) => n === 'span_trace_id')) return undefined;
  try {
    return await withConnection(duck, async (conn) => {
      const sql = `SELECT DISTINCT span_trace_id FROM read_parquet(${sqlString(dataPath)}) WHERE span_trace_id IS NOT NULL LIMIT ${MAX_IDS + 1}`;
      // The ids stay in DuckDB's result and become JavaScript strings one chunk (2,048) at a time: read
      // as rows at once, the 100,000 distinct ids of a compacted hour of spans held ~29 MB of the main
      // process's heap, once per traces dataset merged, at the flush phase's peak of issue 18's
      // workload (docs/memory.md).
      const result = (await conn.run(sql)) as DuckDBMaterializedResult;
      if (result.rowCount > MAX_IDS) return undefined;
      const filter = emptyFilter(result.rowCount);
      for (let c = 0; c < result.chunkCount; c++) {
        const chunk = result.getChunk(c);
        const ids = chunk.getColumnVector(0);
        for (let r = 0; r < chunk.rowCount; r++) addId(filter, String(ids.getItem(r)));
      }
      return Buffer.from(filter).toString('base64');
    });
  } catch (err) {
    log.warn('could not build a trace-id index; the file goes without one', { key: dataKey, error: (err as Error).message });
    return undefined;
  }
}
