import { holdToLimits, timeLimitMessage } from '../worker/deadline.ts';
import { quotedIdentifier } from '@duckdb/node-api';
import { DomainError, notFound } from '../../errors.ts';
import type { QueryPool } from '../worker/pool.ts';
import { linkName } from '../sql/runJob.ts';
import { clampMs, HISTOGRAM_COLUMNS, labelColumns, STALE_COLUMN, VALUE_COLUMN } from './storage.ts';
import { OTLP_MARKER_COLUMN, otlpSeriesView } from './otlp.ts';
import { PROMQL_NOT_BUILT, promqlBuilt } from './engine.ts';
import type { LabelIndex } from './labelIndex.ts';
import { PATH_PLACEHOLDER, SAMPLE_BYTES, type CachedGroup } from './sampleCache.ts';
import { fileSetKey, GrantSets, setRef } from './grantSets.ts';
import type { PromqlFileSet } from '../worker/protocol.ts';
import { scanSql, SERIES_MAX_TIME, SERIES_MIN_TIME, seriesIndexColumns, seriesRelationSql, type Snapshot, type TableSource } from '../../storage/scan.ts';

export interface PromqlLimits {
  /** The same time limit as SQL (P_QUERY_TIMEOUT): past it the worker is killed and the answer is a timeout. */
  timeoutMs: number;
  /** Most samples a query may hold at once (P_PROMQL_MAX_SAMPLES, Prometheus' --query.max-samples). */
  maxSamples: number;
  /** Columns of a sample row that are not labels, with their DuckDB types (the ingest side's fixed columns). */
  fixedColumns: ReadonlyMap<string, string>;
  /** Columns of an OTLP metrics row that are not attributes (src/ingest/otlp/metrics.ts); empty: no OTLP mapping. */
  otlpColumns?: ReadonlySet<string>;
  /** Each query worker's sample cache (P_PROMQL_CACHE_BYTES; 0: none): files up to a quarter of it are read through it. */
  cacheBytes?: number;
}

/** The request the engine (promql/main.go `request`) takes. */
export interface PromqlRequest {
  op: 'query' | 'query_range' | 'series' | 'labels' | 'label_values';
  query?: string;
  time?: number;
  start?: number;
  end?: number;
  step?: number;
  lookbackMs?: number;
  match?: string[];
  name?: string;
  limit?: number;
}

export interface PromqlCall {
  dataset: string;
  request: PromqlRequest;
  principalId: string;
  signal?: AbortSignal;
}

/**
 * Runs PromQL requests in the query workers, under the same admission limits (per key and in total),
 * time limit and cancellation as SQL. The worker asks for the dataset's files of the time range the
 * engine needs; each ask takes a snapshot (storage's scan seam), held until the answer is in.
 */
export class PromqlExecutor {
  /** Answers series, labels and label values in this process when it can (set by the query component). */
  labelIndex?: LabelIndex;

  constructor(
    private readonly source: TableSource,
    private readonly pool: QueryPool,
    private readonly limits: PromqlLimits,
  ) {}

  /** The Prometheus API's JSON body (success or error envelope from the engine); DomainErrors for the rest. */
  async run(call: PromqlCall): Promise<string> {
    const meta = await this.source.resolve(call.dataset);
    if (!meta) throw notFound(`dataset "${call.dataset}" does not exist`);
    // Said here, before a query worker is taken: the engine is a file of this install (built with Go).
    if (!promqlBuilt()) throw new DomainError('unavailable', PROMQL_NOT_BUILT);
    const name = meta.name;
    // Series, labels and label values from the in-process label index where it can answer exactly (labelIndex.ts).
    if (this.labelIndex && META_OPS.has(call.request.op)) {
      const index = this.labelIndex;
      const answer = await this.pool.admitted(call.principalId, () => index.answer(name, call.request));
      if (answer !== undefined) return answer;
    }
    const request = JSON.stringify({ lookbackMs: 5 * 60_000, ...call.request, maxSamples: this.limits.maxSamples });
    const releases: (() => void)[] = [];
    /** The snapshots granted (the files a damaged link the worker names is one of). */
    const granted: Snapshot[] = [];
    let filesDir = '';
    const exec = await this.pool.run(call.principalId, (dir) => {
      filesDir = dir;
      return { type: 'promql', request };
    });
    const release = holdToLimits(exec, { timeoutMs: this.limits.timeoutMs, timeoutMessage: timeLimitMessage(this.limits.timeoutMs), signal: call.signal });
    try {
      for await (const m of exec.events) {
        if (m.type === 'need') {
          for (const link of m.damaged ?? []) await this.damaged(name, link, granted);
          const minMs = clampMs(m.minMs);
          const maxMs = clampMs(m.maxMs);
          const labelsOnly = m.labelsOnly === true;
          const snap = labelsOnly ? await this.source.seriesSnapshot(name, minMs, maxMs + 1) : await this.source.snapshot(name, minMs, maxMs + 1);
          releases.push(snap.release);
          granted.push(snap);
          exec.grant(this.grantOf(snap, minMs, maxMs, filesDir, labelsOnly, m.have));
        } else if (m.type === 'promql') return m.json;
        else if (m.type === 'error') throw new DomainError(m.kind, m.message);
      }
      throw new DomainError('unavailable', 'the query worker ended without an answer', 1);
    } finally {
      release();
      for (const r of releases) r();
    }
  }

  /** The file-set parts of grants built lately (grantSets.ts), named by id to workers that hold them. */
  private readonly sets = new GrantSets<PromqlFileSet>();

  /**
   * A granted file the worker could not read: a series index is left unused (its file is read
   * instead), a data file is set aside, as the SQL path does (the next grant is without either).
   */
  private async damaged(dataset: string, link: string, granted: Snapshot[]): Promise<void> {
    const file = granted.flatMap((snap) => snap.files).find((f) => linkName(f.path) === link);
    if (!file) return;
    const reason = 'the query worker could not read it';
    if (file.index === true) this.source.seriesIndexDamaged(dataset, file.key, reason);
    else await this.source.setAsideDamaged(dataset, file.key, reason);
  }

  private grantOf(snap: Snapshot, minMs: number, maxMs: number, filesDir: string, labelsOnly: boolean, have: number[] | undefined) {
    const pathFor = (file: string) => `${filesDir}/${linkName(file)}`;
    // A dataset without sample values nor native histograms (no metrics yet, or not a metrics dataset)
    // selects nothing.
    const hasValue = snap.schema[VALUE_COLUMN] !== undefined;
    const isMetrics = hasValue || snap.schema.data_point_scale !== undefined;
    // A remote-write dataset's files small enough are read through the worker's sample cache; the view
    // reads the rest (larger files, the WAL).
    const cacheable = isMetrics && snap.schema[OTLP_MARKER_COLUMN] === undefined ? this.cacheable(snap) : [];
    const inCache = new Set(cacheable);
    const rest: Snapshot = cacheable.length ? { ...snap, files: snap.files.filter((f) => !inCache.has(f)) } : snap;
    const timeColumn = snap.meta.timeColumn;
    const schemaJson = JSON.stringify(snap.schema);
    const key = fileSetKey({ dataset: snap.meta.name, labelsOnly, schemaJson, timeColumn, files: snap.files, segments: snap.segments, cacheBytes: this.limits.cacheBytes ?? 0 });
    // Every file and segment of the snapshot is linked: the views and the cached groups read a part each.
    const links = () => [...snap.files.map((f) => f.path), ...snap.segments.map((s) => s.path)].map((src) => ({ name: linkName(src), src }));
    // Label sets come from the series relation (files' series indexes, or per file the tuples an index
    // would hold), under the data view's name and column names, so that a view over it reads either.
    const series = () =>
      seriesRelationSql({ schema: snap.schema, timeColumn, files: rest.files.map((f) => ({ ...f, index: f.index === true })), segments: snap.segments }, minMs, maxMs + 1, pathFor);
    // Built when read: with every file in the cache and nothing in the WAL there is no view to make.
    const scan = () => (isMetrics && !labelsOnly ? scanSql(rest, minMs, maxMs + 1, pathFor) : undefined);
    const range = { minMs, maxMs, labelsOnly };
    const mapped = isMetrics && this.limits.otlpColumns ? this.otlpMapped(snap, labelsOnly, series, scan) : undefined;
    if (mapped) {
      const set = this.sets.get(key, () => ({ dataset: snap.meta.name, links: links(), labels: mapped.labels, timeColumn, stale: true, hasValue: true, histogramColumns: mapped.histogramColumns }));
      return { ...range, views: [{ name: quotedIdentifier(snap.meta.name), sql: mapped.sql }], ...setRef(set, have) };
    }
    const set = this.sets.get(key, () => {
      const cached = this.cachedGroups(rest, cacheable, labelsOnly, schemaJson);
      return {
        dataset: snap.meta.name,
        links: links(),
        ...(cached.length ? { cached, cacheBytes: this.limits.cacheBytes } : {}),
        labels: labelColumns(snap.schema, this.limits.fixedColumns),
        timeColumn,
        stale: snap.schema[STALE_COLUMN] !== undefined,
        hasValue,
        histogramColumns: [...Object.keys(HISTOGRAM_COLUMNS), 'data_point_sum'].filter((c) => snap.schema[c] !== undefined),
      };
    });
    // Nothing left for the view (every file cached, no WAL): no DuckDB scan at all.
    const restEmpty = cacheable.length > 0 && !rest.files.length && !snap.segments.length;
    const sql = !isMetrics || restEmpty ? undefined : labelsOnly ? series() : scan();
    return { ...range, views: sql !== undefined ? [{ name: quotedIdentifier(snap.meta.name), sql }] : [], ...setRef(set, have) };
  }

  /**
   * OTLP points (a dataset that got any has their flags column) are read through the Prometheus mapping
   * of otlp.ts; remote-write rows pass through it unchanged. For label sets the mapping reads the series
   * relation, which holds every column it names series by (seriesIndexColumns).
   */
  private otlpMapped(snap: Snapshot, labelsOnly: boolean, series: () => string, scan: () => string | undefined) {
    const otlpOpts = { timeColumn: snap.meta.timeColumn, prometheusColumns: this.limits.fixedColumns, otlpColumns: this.limits.otlpColumns ?? new Set<string>() };
    return labelsOnly
      ? otlpSeriesView(`(${series()})`, Object.fromEntries(seriesIndexColumns(snap.schema).map((c) => [c, snap.schema[c]])), {
          ...otlpOpts,
          spanColumns: [SERIES_MIN_TIME, SERIES_MAX_TIME],
          remoteWriteRows: snap.schema[STALE_COLUMN] !== undefined,
        })
      : otlpSeriesView(`(${scan()!})`, snap.schema, otlpOpts);
  }

  /** Files the worker's sample cache may hold: each at most a quarter of its budget (SAMPLE_BYTES a sample row). */
  private cacheable(snap: Snapshot): Snapshot['files'] {
    const budget = this.limits.cacheBytes ?? 0;
    return budget > 0 ? snap.files.filter((f) => f.rows * SAMPLE_BYTES <= budget / 4) : [];
  }

  /**
   * A file's SELECT template by what it depends on (rows or label sets, the dataset's schema and time
   * column, the file's path: a path's content never changes). Building the 120 templates of an hour of
   * minute files cost 1–2 ms of every selector's grant (measured; docs/performance.md).
   */
  private readonly templates = new Map<string, Map<string, string>>();

  /** Each cached file's whole content as a SELECT (its path a placeholder), grouped by that SQL; files by link name. */
  private cachedGroups(rest: Snapshot, files: Snapshot['files'], labelsOnly: boolean, schemaJson: string): CachedGroup[] {
    const groups = new Map<string, { paths: string[]; rows: number[] }>();
    const context = `${labelsOnly ? 'L' : 'S'}\u0000${rest.meta.timeColumn}\u0000${schemaJson}\u0000`;
    // Bounded: past it (schemas changing, files replaced by compaction), built again as needed.
    if (this.templates.size > 64) this.templates.clear();
    let byPath = this.templates.get(context);
    if (!byPath || byPath.size > 5_000) this.templates.set(context, (byPath = new Map()));
    for (const f of files) {
      let sql = byPath.get(f.path);
      if (sql === undefined) {
        sql = labelsOnly
          ? seriesRelationSql({ schema: rest.schema, timeColumn: rest.meta.timeColumn, files: [{ ...f, index: f.index === true }], segments: [] }, f.minMs, f.maxMs + 1, () => PATH_PLACEHOLDER)
          : scanSql({ ...rest, files: [f], segments: [] }, f.minMs, f.maxMs + 1, () => PATH_PLACEHOLDER);
        byPath.set(f.path, sql);
      }
      const name = linkName(f.path);
      const group = groups.get(sql);
      if (group) {
        group.paths.push(name);
        group.rows.push(f.rows);
      } else groups.set(sql, { paths: [name], rows: [f.rows] });
    }
    // Each file's rows go along: the worker decodes the files in batches bounded by them (sampleCache.ts).
    return [...groups].map(([sql, g]) => ({ sql, ...g }));
  }
}

const META_OPS = new Set<PromqlRequest['op']>(['series', 'labels', 'label_values']);

