import type { CachedFile } from './sampleCache.ts';

/*
 * A metric name's samples of a held file set, each series' samples of every cached file in one run
 * (docs/promql.md "The sample cache"). A panel over an hour of minute files otherwise gathers a slice
 * per series and file — ~8,000 of 4 samples each for `node_cpu_seconds_total` on six targets — and
 * copies them value by value, 0.8 ms a panel on average and 2.7 ms on the big ones
 * (docs/performance.md). Built on the first selector of the name over the set, kept while the worker
 * holds the set: the next panels and refreshes over it select one run per series.
 *
 * Exact by construction: a run is the files' runs concatenated in file order, which is what the slices
 * give; it is only made when that concatenation is in time order (every file's first sample of a series
 * at or after the previous file's last), so a time search over it selects exactly the samples the
 * per-file searches would, in the same order. Files that overlap in time, or that hold native
 * histograms, are left to the per-file slices.
 */

/** The merged runs of one file set, by metric name (null: not mergeable, use the files). */
interface SetRuns {
  names: Map<string, CachedFile | null>;
  bytes: number;
}

export class MergedRuns {
  /** By the held set's cached groups (the same object while the worker holds the set), oldest first. */
  private readonly sets = new Map<object, SetRuns>();
  private held = 0;

  constructor(private readonly maxSets = 8) {}

  /** Bytes the runs hold (each is a copy of its files' samples). */
  get bytes(): number {
    return this.held;
  }

  /**
   * The name's merged run of `files` (the set's cached files, in order), made if needed within
   * `maxBytes`: the runs of other sets go first; one that does not fit beside this set's own runs is
   * not made (and not tried again while the set is held: its runs only grow).
   */
  of(set: object, files: CachedFile[], name: string, maxBytes: number): CachedFile | undefined {
    let runs = this.sets.get(set);
    if (!runs) {
      runs = { names: new Map(), bytes: 0 };
      this.sets.set(set, runs);
      if (this.sets.size > this.maxSets) this.drop(this.sets.keys().next().value!);
    }
    const known = runs.names.get(name);
    if (known !== undefined) return known ?? undefined;
    const merged = mergeName(files, name, maxBytes - runs.bytes);
    if (merged) {
      for (const other of [...this.sets.keys()]) if (this.held + merged.bytes > maxBytes && other !== set) this.drop(other);
      runs.bytes += merged.bytes;
      this.held += merged.bytes;
    }
    runs.names.set(name, merged);
    return merged ?? undefined;
  }

  private drop(set: object): void {
    const runs = this.sets.get(set);
    if (!runs) return;
    this.held -= runs.bytes;
    this.sets.delete(set);
  }
}

/** Each series of the name: its local index in the merged file, and its samples in all files. */
function layout(files: CachedFile[], name: string): { ids: number[]; counts: number[]; index: Map<number, number> } | null {
  const index = new Map<number, number>();
  const ids: number[] = [];
  const counts: number[] = [];
  for (const f of files) {
    const locals = f.byName.get(name);
    if (!locals) continue;
    if (f.h) return null;
    for (const l of locals) {
      let m = index.get(f.ids[l]);
      if (m === undefined) {
        m = ids.length;
        index.set(f.ids[l], m);
        ids.push(f.ids[l]);
        counts.push(0);
      }
      counts[m] += f.off[l + 1] - f.off[l];
    }
  }
  return { ids, counts, index };
}

/** A merged run's bytes (as the sample cache counts a file's). */
const runBytes = (series: number, samples: number) => series * 40 + samples * 17 + 64;

/**
 * The name's series of `files` as one file: each series' runs concatenated in file order; null when
 * not mergeable (see above) or over `maxBytes` (known before anything is copied).
 */
export function mergeName(files: CachedFile[], name: string, maxBytes = Infinity): CachedFile | null {
  const plan = layout(files, name);
  if (!plan) return null;
  const { ids, counts, index } = plan;
  const n = ids.length;
  const off = new Int32Array(n + 1);
  for (let m = 0; m < n; m++) off[m + 1] = off[m] + counts[m];
  const total = off[n];
  const bytes = runBytes(n, total);
  if (bytes > maxBytes) return null;
  const t = new BigInt64Array(total);
  const v = new Float64Array(total);
  const k = new Uint8Array(total);
  const lo = new Float64Array(n).fill(Infinity);
  const hi = new Float64Array(n).fill(-Infinity);
  const at = off.slice(0, n);
  for (const f of files) {
    for (const l of f.byName.get(name) ?? []) {
      const m = index.get(f.ids[l])!;
      const [a, b] = [f.off[l], f.off[l + 1]];
      if (a === b) continue;
      // In time order across files, or not merged: a time search must see one ascending run.
      if (at[m] > off[m] && f.t[a] < t[at[m] - 1]) return null;
      t.set(f.t.subarray(a, b), at[m]);
      v.set(f.v.subarray(a, b), at[m]);
      k.set(f.k.subarray(a, b), at[m]);
      at[m] += b - a;
      lo[m] = Math.min(lo[m], f.lo[l]);
      hi[m] = Math.max(hi[m], f.hi[l]);
    }
  }
  const locals = Array.from({ length: n }, (_, m) => m);
  return { bytes, ids: Int32Array.from(ids), off, lo, hi, t, v, k, t32: new Int32Array(t.buffer), v32: new Int32Array(v.buffer), byName: new Map([[name, locals]]) };
}
