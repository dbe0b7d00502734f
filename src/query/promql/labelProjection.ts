import { encodeLabels, type CachedFile, type SampleCache, type Series } from './sampleCache.ts';
import { mayMatch } from './cachedSelect.ts';
import type { SeriesRequest } from './storage.ts';

/*
 * The labels and label values calls need less of a label set than the series call: `labels` only its
 * label names, `label values` only the one label's value. Their fetch (every series of the range, or of
 * each match[] selector) asked the cache for thousands of label sets (2,906 over the bench's hour, a
 * fifth of a megabyte), which the engine decoded, hashed and sorted to keep a few dozen names or values.
 * Projected here, each label set is reduced to what the answer reads, and the reduced sets sent once
 * each: a few dozen instead of thousands.
 *
 * Exact: the engine computes the same answer from the reduced sets — the union of their names (labels)
 * or of the label's non-empty values (label values) — and checks every matcher again on them, so a
 * reduced set keeps each label a matcher names with its value (a matcher only reads its own label). The
 * DuckDB side's label sets (the WAL, files too large to cache) are sent whole, as before; the engine
 * merges both as it merges any label sets.
 */

/** What the call answers: `labels`, or the values of label `name`. */
export interface Projection {
  op: 'labels' | 'label_values';
  name?: string;
}

/** The projection a PromQL job's request asks for (its JSON), or undefined (a query or series call). */
export function projectionOf(requestJson: string): Projection | undefined {
  const r = JSON.parse(requestJson) as { op?: string; name?: string };
  if (r.op === 'labels') return { op: 'labels' };
  if (r.op === 'label_values' && r.name) return { op: 'label_values', name: r.name };
  return undefined;
}

/** A label's value where the answer only reads its name (any non-empty string: the engine drops empty values). */
const PRESENT = '1';

/**
 * The reduced label sets of the cached files' series that may match the request in its range, each
 * distinct one once, in encodeSeries' binary form (without its leading count, returned apart).
 */
export function selectProjected(cache: SampleCache, files: CachedFile[], req: SeriesRequest, p: Projection): { count: number; parts: Uint8Array[] } {
  const keep = new Set(req.matchers.map((m) => m.name));
  if (p.name) keep.add(p.name);
  const signature = `${p.op}\u0000${[...keep].sort().join('\u0000')}`;
  // Each label set is looked at once, however many files hold it.
  const seen = new Uint8Array(cache.idLimit);
  const reduced = new Map<string, [string, string][]>();
  for (const f of files) {
    for (let l = 0; l < f.ids.length; l++) {
      const id = f.ids[l];
      if (seen[id] || f.hi[l] < req.start || f.lo[l] > req.end) continue;
      seen[id] = 1;
      const s = cache.labelSet(id);
      if (!mayMatch(s, req.matchers)) continue;
      // label values: a set without the label adds no value.
      if (p.name && !s.labels.get(p.name)) continue;
      const [key, pairs] = reduce(s, keep, p, signature);
      if (!reduced.has(key)) reduced.set(key, pairs);
    }
  }
  const parts: Uint8Array[] = [];
  // No samples: a zero count after each label set. One buffer: one pipe write.
  for (const pairs of reduced.values()) parts.push(encodeLabels(pairs), new Uint8Array(4));
  return { count: reduced.size, parts: [Buffer.concat(parts)] };
}

/** A label set reduced for a projection (the labels `keep` with their values; for labels, the other names), memoised on the set for the next call alike. */
function reduce(s: Series, keep: Set<string>, p: Projection, signature: string): [string, [string, string][]] {
  const memo = reducedMemo.get(s);
  if (memo?.signature === signature) return memo.reduced;
  const pairs: [string, string][] = [];
  for (const [k, v] of s.labels) {
    if (!v) continue;
    if (keep.has(k)) pairs.push([k, v]);
    else if (p.op === 'labels') pairs.push([k, PRESENT]);
  }
  const reduced: [string, [string, string][]] = [pairs.map(([k, v]) => `${k}\u0000${v}`).join('\u0001'), pairs];
  // One projection per label set: a dashboard's labels and label values calls repeat theirs.
  reducedMemo.set(s, { signature, reduced });
  return reduced;
}

/** Weak: a label set the cache dropped takes its reduction with it. */
const reducedMemo = new WeakMap<Series, { signature: string; reduced: [string, [string, string][]] }>();
