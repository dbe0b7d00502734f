import { MAX_MS, MIN_MS, type Matcher, type SeriesRequest } from './storage.ts';
import type { CachedFile, SampleCache, Series } from './sampleCache.ts';

/*
 * What a selector gets from the worker's sample cache (sampleCache.ts): the series of the decoded files
 * that may match, with their samples in the range, in encodeSeries' binary form.
 */

/** Whether a series may match: equality matchers exactly (an absent label is ''), regular expressions left to the engine. */
export function mayMatch(s: Series, matchers: Matcher[]): boolean {
  for (const m of matchers) {
    if (m.type === '=' && (s.labels.get(m.name) ?? '') !== m.value) return false;
    if (m.type === '!=' && (s.labels.get(m.name) ?? '') === m.value) return false;
  }
  return true;
}

/** First index in [lo, hi) of `t32` (a file's times as i32 pairs, little-endian, ascending) at or after ms. */
function lowerBound(t32: Int32Array, lo: number, hi: number, ms: number): number {
  // Read as numbers (exact below 2^53), not through the BigInt64Array: a BigInt per read cost more
  // than the search.
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (t32[2 * mid + 1] * 4294967296 + (t32[2 * mid] >>> 0) < ms) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * The series of these decoded files that may match the request, in encodeSeries' binary form (without
 * its leading count, returned apart): each label set once, its samples in [start, end] from every file
 * in file order (labels only: each label set whose span in a file overlaps the range, without samples).
 * The slices are gathered in flat arrays (group, file, from, to), not an array per slice: a dashboard
 * panel over an hour of minute files has ~100,000 of them (840 series × 126 files), whose allocation
 * and the BigInt reads of the time search cost 60–270 ms a panel (docs/performance.md).
 */
export function selectCached(cache: SampleCache, files: CachedFile[], req: SeriesRequest): { count: number; parts: Uint8Array[] } {
  const name = req.matchers.find((m) => m.type === '=' && m.name === '__name__');
  /** Label set id → 1 + its group (in order of first slice), -1: does not match, 0: not seen yet (ids are dense). */
  const groupOf = new Int32Array(cache.idLimit);
  const ids: number[] = [];
  let slices = new Int32Array(4 * 1024);
  let n = 0;
  const start = Math.max(MIN_MS, req.start);
  const end = Math.min(MAX_MS, req.end);
  files.forEach((f, fi) => {
    const candidates = name ? f.byName.get(name.value) : undefined;
    const count = name ? (candidates?.length ?? 0) : f.ids.length;
    const t32 = f.t32;
    for (let c = 0; c < count; c++) {
      const l = candidates ? candidates[c] : c;
      if (f.hi[l] < req.start || f.lo[l] > req.end) continue;
      const id = f.ids[l];
      let g = groupOf[id] - 1;
      if (g === -2) continue;
      if (g === -1 && !mayMatch(cache.labelSet(id), req.matchers)) {
        groupOf[id] = -1;
        continue;
      }
      // A file's series wholly inside the range (most of a panel's minute files) needs no search.
      const inside = f.lo[l] >= start && f.hi[l] <= end;
      const lo = req.labelsOnly || inside ? f.off[l] : lowerBound(t32, f.off[l], f.off[l + 1], start);
      const hi = req.labelsOnly || inside ? f.off[l + 1] : lowerBound(t32, lo, f.off[l + 1], end + 1);
      if (lo === hi && !req.labelsOnly) continue;
      if (g === -1) {
        g = ids.length;
        groupOf[id] = g + 1;
        ids.push(id);
      }
      // Label sets: each once, whatever the files that have it.
      if (req.labelsOnly) continue;
      if (n + 4 > slices.length) {
        const grown = new Int32Array(slices.length * 2);
        grown.set(slices);
        slices = grown;
      }
      slices[n++] = g;
      slices[n++] = fi;
      slices[n++] = lo;
      slices[n++] = hi;
    }
  });
  return { count: ids.length, parts: encodeGroups(cache, files, ids, slices.subarray(0, n), req.labelsOnly) };
}

/**
 * encodeSeries' form of each label set and its slices of the files' samples (`slices`: group, file,
 * from, to; a group's in file order), copied into one buffer: a part per slice (a series over an hour of
 * minute files has 60) made one pipe write each, which cost ten times the copy.
 */
function encodeGroups(cache: SampleCache, files: CachedFile[], ids: number[], slices: Int32Array, labelsOnly: boolean): Uint8Array[] {
  // Each group's slices together, in file order (a counting sort by group: stable).
  const samples = new Float64Array(ids.length);
  const first = new Int32Array(ids.length + 1);
  let size = 0;
  for (let s = 0; s < slices.length; s += 4) {
    const g = slices[s];
    samples[g] += slices[s + 3] - slices[s + 2];
    first[g + 1]++;
    const h = files[slices[s + 1]].h;
    if (h) for (let i = slices[s + 2]; i < slices[s + 3]; i++) size += h.get(i)?.length ?? 0;
  }
  for (let g = 0; g < ids.length; g++) {
    first[g + 1] += first[g];
    size += cache.labelSet(ids[g]).head.length + 4 + 17 * samples[g];
  }
  const order = new Int32Array(slices.length / 4);
  const next = first.slice(0, ids.length);
  for (let s = 0; s < slices.length; s += 4) order[next[slices[s]]++] = s;
  const out = new Uint8Array(size);
  const dv = new DataView(out.buffer);
  let at = 0;
  const put = (b: Uint8Array) => {
    out.set(b, at);
    at += b.length;
  };
  for (let g = 0; g < ids.length; g++) {
    put(cache.labelSet(ids[g]).head);
    dv.setUint32(at, samples[g], true);
    at += 4;
    if (labelsOnly) continue;
    const mine = order.subarray(first[g], first[g + 1]);
    at = copySamples(out, dv, at, files, slices, mine);
    for (const s of mine) {
      const h = files[slices[s + 1]].h;
      if (h) for (let i = slices[s + 2]; i < slices[s + 3]; i++) if (h.has(i)) put(h.get(i)!);
    }
  }
  return [out];
}

/** From this many samples a slice is copied as bytes at once (a merged run: mergedRuns.ts), below value by value. */
const BULK_SAMPLES = 32;

/**
 * A group's times, then values, then kinds, from its slices, written at `at` (returns the end). Short
 * slices (a minute file's few samples of a series) value by value through the DataView (the output's
 * offsets are not 8-aligned), a few times faster than a view per slice; long ones (a merged run of an
 * hour) as one copy of bytes each.
 */
function copySamples(out: Uint8Array, dv: DataView, at: number, files: CachedFile[], slices: Int32Array, mine: Int32Array): number {
  // Times and values as i32 pairs: the bits as stored (a NaN read as a number may lose its payload).
  for (const part of ['t', 'v'] as const)
    for (const s of mine) {
      const f = files[slices[s + 1]];
      const w = part === 't' ? f.t32 : f.v32;
      const [lo, hi] = [slices[s + 2], slices[s + 3]];
      if (hi - lo >= BULK_SAMPLES) {
        out.set(new Uint8Array(w.buffer, w.byteOffset + 8 * lo, 8 * (hi - lo)), at);
        at += 8 * (hi - lo);
        continue;
      }
      for (let i = lo; i < hi; i++, at += 8) {
        dv.setInt32(at, w[2 * i], true);
        dv.setInt32(at + 4, w[2 * i + 1], true);
      }
    }
  for (const s of mine) {
    const k = files[slices[s + 1]].k;
    const [lo, hi] = [slices[s + 2], slices[s + 3]];
    if (hi - lo >= BULK_SAMPLES) {
      out.set(k.subarray(lo, hi), at);
      at += hi - lo;
    } else for (let i = lo; i < hi; i++) dv.setUint8(at++, k[i]);
  }
  return at;
}
