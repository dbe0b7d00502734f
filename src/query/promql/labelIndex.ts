import type { DuckDBSource } from '../../duckdb.ts';
import { log } from '../../log.ts';
import type { Snapshot, TableSource } from '../../storage/scan.ts';
import {
  anyIn,
  fileEntryBytes,
  PAIR_OVERHEAD,
  readFileLabels,
  readFilesLabels,
  readSegmentLabels,
  SEGMENT_READ_MAX,
  segmentEntryBytes,
  SET_OVERHEAD,
  type Columns,
  type FileLabels,
  type SegmentLabels,
} from './labelIndexRead.ts';
import { compareUtf8, seriesJson, stringsJson, type Pairs } from './metaAnswer.ts';
import { parseMetaSelector, type ParsedMatcher } from './metaSelector.ts';
import { OTLP_MARKER_COLUMN } from './otlp.ts';
import { clampMs, labelColumns, MAX_MS, MIN_MS, VALUE_COLUMN } from './storage.ts';
import type { PromqlRequest } from './executor.ts';

/*
 * The in-process label index (issue 37): the series, labels and label values calls of a remote-write
 * dataset answered in the process that took the request, without the hop to a query worker, DuckDB
 * or the engine. Per dataset it holds the distinct label sets, and per data file (by key: files never
 * change) the label sets its series index lists with their first and last time in it, read once from
 * the sidecar; per sealed WAL segment of this process (immutable too) the label sets with the times of
 * their rows, read once from the segment. Each call takes the same series snapshot as the worker path
 * (every file of the range through the catalog, so a second worker's files; this process' WAL) and
 * answers from the entries of what it holds, with the same rules as the engine path: a file's label
 * set counts when its span in the file overlaps [start, end], a WAL label set when a row of it is in
 * [start, end] (labelSetsSql and seriesRelationSql).
 *
 * Only what it answers exactly: anything else gives undefined and the call takes the worker path —
 * a match[] outside metaSelector.ts' subset, a dataset with OTLP points (their Prometheus mapping is
 * not a plain column → label map), a file without a usable series index, a WAL row it cannot read as
 * read_json would, the series call without match[] (the engine's error), and a dataset whose index
 * would exceed the memory bound (P_PROMQL_LABEL_INDEX_BYTES).
 */

/** One metrics dataset's index; reset when its label columns change (a new label, a widened column). */
class DatasetLabels {
  readonly sets: Pairs[] = [];
  private readonly byKey = new Map<string, number>();
  readonly files = new Map<string, Promise<FileLabels | undefined>>();
  readonly segments = new Map<string, Promise<SegmentLabels | undefined>>();
  bytes = 0;
  /**
   * The read of missing files under way, if any (LabelIndex.readMissing): a cold call's in the
   * background, or one that calls wait for. True when it left the index past its bound or failed.
   */
  reading?: Promise<boolean>;
  /** The distinct label sets of a list of files (by their keys), for the files a range holds whole. */
  private readonly unions = new Map<string, Int32Array>();
  constructor(readonly signature: string) {}

  /**
   * The ids of every label set of `files`, each once: a dashboard's calls ask for the same minute files
   * again and again (the hour moves by a file a minute), so the union is kept for the next call.
   */
  unionOf(files: FileLabels[]): Int32Array {
    const key = files.map((f) => f.key).join('\u0000');
    let ids = this.unions.get(key);
    if (ids) return ids;
    const seen = new Uint8Array(this.sets.length);
    const out: number[] = [];
    for (const f of files) {
      for (const id of f.ids) {
        if (seen[id]) continue;
        seen[id] = 1;
        out.push(id);
      }
    }
    ids = Int32Array.from(out);
    // A few ranges' worth: a new minute file makes a new list.
    if (this.unions.size >= 8) this.unions.delete(this.unions.keys().next().value!);
    this.unions.set(key, ids);
    return ids;
  }

  /** The id of a label set (pairs sorted by name, empty values left out), interned. */
  intern(pairs: [string, string][]): number {
    // Length-prefixed: unambiguous whatever characters the names and values hold.
    const key = pairs.map(([k, v]) => `${k.length}:${k}${v.length}:${v}`).join('');
    let id = this.byKey.get(key);
    if (id === undefined) {
      id = this.sets.length;
      this.sets.push(pairs);
      this.byKey.set(key, id);
      this.bytes += SET_OVERHEAD + key.length * 4 + pairs.length * PAIR_OVERHEAD;
    }
    return id;
  }
}

/** A sealed WAL segment's cache key: its path and size (a dataset made again reuses paths, never both). */
const segmentKey = (s: Snapshot['segments'][number]) => `${s.path}\u0000${s.bytes}`;

/** More files than this not held yet: they are read in one statement before the call is answered. */
const COLD_FILES_MAX = 4;

/**
 * More files than this not held yet: the call takes the workers while they are read in the background.
 * Below it they are read first: the last hour of the dashboard bench (121 files, 2,906 series) in
 * ~0.3 s, where the workers' answer took 0.6–1 s (docs/performance.md, the meta calls).
 */
const COLD_READ_MAX = 360;

export interface LabelIndexOptions {
  source: TableSource;
  duck: DuckDBSource;
  /** The columns of a remote-write row that are not labels (the ingest side's fixed columns). */
  fixedColumns: { has(column: string): boolean };
  /** P_PROMQL_LABEL_INDEX_BYTES: most estimated bytes per dataset; 0: off. */
  maxBytes: number;
  /** More files not held than this: the call takes the workers while they are read (default COLD_READ_MAX; the tests' smaller). */
  coldReadMax?: number;
}

export class LabelIndex {
  private readonly datasets = new Map<string, DatasetLabels>();
  /** Datasets found past the bound, until when they are not tried again (epoch ms). */
  private readonly overBudget = new Map<string, number>();

  constructor(private readonly opts: LabelIndexOptions) {}

  /** Estimated bytes held, all datasets (the lakehouse_promql_label_index_bytes gauge). */
  get bytes(): number {
    let n = 0;
    for (const d of this.datasets.values()) n += d.bytes;
    return n;
  }

  /** The engine's JSON answer to a series, labels or label values request, or undefined: take the worker path. */
  async answer(dataset: string, req: PromqlRequest, retried = false): Promise<string | undefined> {
    if (this.opts.maxBytes <= 0) return undefined;
    if ((this.overBudget.get(dataset) ?? 0) > Date.now()) return undefined;
    const selectors = selectorsOf(req);
    if (!selectors) return undefined;
    const start = clampMs(req.start ?? MIN_MS);
    const end = clampMs(req.end ?? MAX_MS);
    const snap = await this.opts.source.seriesSnapshot(dataset, start, end + 1);
    let handedOff = false;
    try {
      const columns = answerableColumns(snap, this.opts.fixedColumns);
      if (!columns) return undefined;
      const idx = this.datasetOf(dataset, snap.meta.generation, columns);
      const fresh = idx.bytes === 0;
      const missing = snap.files.filter((f) => !idx.files.has(f.key)).length;
      // Cold with many files (a first call over days): the workers answer this one while the files are read here.
      if (missing > (this.opts.coldReadMax ?? COLD_READ_MAX)) {
        handedOff = idx.reading === undefined;
        if (handedOff) idx.reading = this.warm(dataset, idx, snap, columns);
        return undefined;
      }
      // Cold over a few hours (a first call, a restart): read in one statement, then answered here.
      // Concurrent calls (a dashboard's variables) share the one read, as they share a background one.
      if (missing > COLD_FILES_MAX) {
        idx.reading ??= this.readMissing(dataset, idx, snap, columns).finally(() => (idx.reading = undefined));
        if (await idx.reading) return undefined;
      }
      const held = await this.load(idx, snap, columns, start, end);
      if (!held) return undefined;
      if (idx.bytes > this.opts.maxBytes) {
        // Label sets of files long gone (series churn) stay interned: built again from what is current.
        if (!fresh && !retried) {
          this.datasets.delete(dataset);
          return await this.answer(dataset, req, true);
        }
        this.pastBound(dataset, idx);
        return undefined;
      }
      const ids = selectedIds(idx, held, start, end, selectors);
      return render(idx, ids, req);
    } finally {
      if (!handedOff) snap.release();
    }
  }

  /** Reads the snapshot's files not held yet in the background, then releases the snapshot (a failure is logged). */
  private warm(dataset: string, idx: DatasetLabels, snap: Snapshot, columns: Columns): Promise<boolean> {
    return this.readMissing(dataset, idx, snap, columns)
      .catch((err: unknown) => {
        log.warn('label index: reading files in the background failed', { dataset, error: (err as Error).message });
        return true;
      })
      .finally(() => {
        idx.reading = undefined;
        snap.release();
      });
  }

  /**
   * Reads the snapshot's files not held yet: all in one statement, then one at a time those it could
   * not read (a file without a usable series index stays out: the call then takes the workers). True
   * when the index went past its bound (it is then dropped).
   */
  private async readMissing(dataset: string, idx: DatasetLabels, snap: Snapshot, columns: Columns): Promise<boolean> {
    const missing = snap.files.filter((f) => !idx.files.has(f.key));
    const all = await readFilesLabels(this.opts.duck, idx, missing, columns);
    for (const [key, entry] of all ?? []) if (!idx.files.has(key)) idx.files.set(key, Promise.resolve(entry));
    if (this.pastBound(dataset, idx)) return true;
    for (const f of snap.files) {
      if (idx.files.has(f.key)) continue;
      const entry = readFileLabels(this.opts.duck, idx, f, columns);
      idx.files.set(f.key, entry);
      if (!(await entry)) idx.files.delete(f.key);
      if (this.pastBound(dataset, idx)) return true;
    }
    return false;
  }

  /** Whether a dataset's index is past the bound (read for a call or in the background): then dropped, and tried again in a minute. */
  private pastBound(dataset: string, idx: DatasetLabels): boolean {
    if (idx.bytes <= this.opts.maxBytes) return false;
    if (this.datasets.get(dataset) === idx) this.datasets.delete(dataset);
    log.info('the label index of a dataset is past its bound; its calls take the query workers', { dataset, bytes: idx.bytes, bound: this.opts.maxBytes });
    this.overBudget.set(dataset, Date.now() + 60_000);
    return true;
  }

  /** A dataset's index, made anew for a new generation (deleted and created again) or new label columns. */
  private datasetOf(name: string, generation: string, columns: Columns): DatasetLabels {
    const signature = generation + '\u0002' + columns.map((c) => `${c.label}\u0000${c.column}`).join('\u0001');
    let idx = this.datasets.get(name);
    if (idx?.signature !== signature) this.datasets.set(name, (idx = new DatasetLabels(signature)));
    return idx;
  }

  /** The entries of the snapshot's files and segments (read once each), or undefined if one cannot be had; forgets those gone. */
  private async load(idx: DatasetLabels, snap: Snapshot, columns: Columns, start: number, end: number) {
    const files: FileLabels[] = [];
    const segments: SegmentLabels[] = [];
    for (const f of snap.files) {
      let entry = idx.files.get(f.key);
      if (!entry) idx.files.set(f.key, (entry = readFileLabels(this.opts.duck, idx, f, columns)));
      const got = await entry;
      if (!got) {
        idx.files.delete(f.key);
        return undefined;
      }
      files.push(got);
    }
    const inSnap = new Set<string>();
    for (const s of snap.segments) {
      const key = segmentKey(s);
      inSnap.add(key);
      // A large segment (a backlog not yet flushed) is left to the workers: parsed here, it would hold up this process.
      if (s.bytes > SEGMENT_READ_MAX) return undefined;
      let entry = idx.segments.get(key);
      if (!entry) idx.segments.set(key, (entry = readSegmentLabels(idx, s.path, snap.meta.timeColumn, columns)));
      const got = await entry;
      if (!got) return undefined;
      segments.push(got);
    }
    forgetGone(idx, snap, inSnap, start, end);
    return { files, segments };
  }
}

/** Each match[] selector's matchers (none: every series), or undefined when one is outside the subset. */
function selectorsOf(req: PromqlRequest): ParsedMatcher[][] | undefined {
  const match = req.match ?? [];
  if (req.op === 'series' && !match.length) return undefined;
  if (req.op === 'label_values' && !req.name) return undefined;
  if (!match.length) return [[]];
  const out: ParsedMatcher[][] = [];
  for (const m of match) {
    const parsed = parseMetaSelector(m);
    if (!parsed) return undefined;
    out.push(parsed);
  }
  return out;
}

/**
 * The dataset's label columns sorted by label, when the index can answer for the snapshot: a
 * remote-write metrics dataset (no OTLP points) whose every file has a usable series index.
 */
function answerableColumns(snap: Snapshot, fixed: { has(column: string): boolean }): Columns | undefined {
  if (snap.schema[VALUE_COLUMN] === undefined && snap.schema.data_point_scale === undefined) return undefined;
  if (snap.schema[OTLP_MARKER_COLUMN] !== undefined) return undefined;
  if (snap.files.some((f) => !f.index || !f.seriesIndex)) return undefined;
  return labelColumns(snap.schema, fixed).sort((a, b) => compareUtf8(a.label, b.label));
}

/** Files of the range no longer in the catalog (compacted, retention), and segments flushed: forgotten. */
function forgetGone(idx: DatasetLabels, snap: Snapshot, segmentsIn: Set<string>, start: number, end: number): void {
  const filesIn = new Set(snap.files.map((f) => f.key));
  for (const [key, entry] of idx.files) {
    if (filesIn.has(key)) continue;
    void entry.then((f) => {
      // A file wholly inside the range would be in the snapshot were it still in the catalog.
      if (!f || (f.minMs >= start && f.maxMs <= end)) {
        if (idx.files.get(key) === entry) idx.files.delete(key);
        if (f) idx.bytes -= fileEntryBytes(f);
      }
    });
  }
  for (const [key, entry] of idx.segments) {
    if (segmentsIn.has(key)) continue;
    idx.segments.delete(key);
    void entry.then((s) => {
      if (s) idx.bytes -= segmentEntryBytes(s);
    });
  }
}

/** Whether a label set matches every matcher of a selector (an absent label's value is empty). */
function matchesAll(pairs: Pairs, matchers: ParsedMatcher[]): boolean {
  for (const m of matchers) {
    let value = '';
    for (const [k, v] of pairs) {
      if (k === m.name) {
        value = v;
        break;
      }
    }
    if (!m.test(value)) return false;
  }
  return true;
}

/**
 * The ids of the label sets in [start, end] that match any selector. Files the range holds whole
 * count every label set they list (their union, kept across calls); files across a bound are looked at
 * label set by label set, as are the WAL's rows.
 */
function selectedIds(idx: DatasetLabels, held: { files: FileLabels[]; segments: SegmentLabels[] }, start: number, end: number, selectors: ParsedMatcher[][]): number[] {
  // 0: not looked at; 1: selected; 2: not.
  const state = new Uint8Array(idx.sets.length);
  const out: number[] = [];
  const any = selectors.length === 1 && selectors[0].length === 0;
  const consider = (id: number) => {
    if (state[id]) return;
    const hit = any || selectors.some((ms) => matchesAll(idx.sets[id], ms));
    state[id] = hit ? 1 : 2;
    if (hit) out.push(id);
  };
  const whole = held.files.filter((f) => f.minMs >= start && f.maxMs <= end);
  for (const id of idx.unionOf(whole)) consider(id);
  for (const f of held.files) {
    if (f.minMs >= start && f.maxMs <= end) continue;
    for (let r = 0; r < f.ids.length; r++) if (f.hi[r] >= start && f.lo[r] <= end) consider(f.ids[r]);
  }
  for (const s of held.segments) {
    for (let r = 0; r < s.ids.length; r++) if (anyIn(s.times[r], start, end)) consider(s.ids[r]);
  }
  return out;
}

/** The answer's JSON from the selected label sets. */
function render(idx: DatasetLabels, ids: number[], req: PromqlRequest): string {
  if (req.op === 'series') return seriesJson(ids.map((id) => idx.sets[id]), req.limit);
  const out = new Set<string>();
  for (const id of ids) {
    for (const [k, v] of idx.sets[id]) {
      if (req.op === 'labels') out.add(k);
      else if (k === req.name) out.add(v);
    }
  }
  return stringsJson(out, req.limit);
}
