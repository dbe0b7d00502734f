import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { ApiError, type Row } from '../lib/api.ts';
import { useSession } from '../lib/store.ts';
import { navigate } from '../lib/route.ts';
import { defaultColumns, defaultQuery, firstDataset, histogramSql } from '../lib/sql.ts';
import { autoBucketSeconds, parseTimestamp, resolveRange, type TimeRange } from '../lib/time.ts';
import { toCsv, toNdjson } from '../lib/export.ts';
import { downloadText } from '../lib/clipboard.ts';
import { useCompletionSchema } from '../lib/useCompletion.ts';
import { SqlEditor } from '../components/SqlEditor.tsx';
import { TimeRangePicker } from '../components/TimeRangePicker.tsx';
import { Histogram } from '../components/Histogram.tsx';
import { ResultsTable } from '../components/ResultsTable.tsx';
import { ColumnPicker } from '../components/ColumnPicker.tsx';
import { SavedQueries } from '../components/SavedQueries.tsx';
import { DatasetSelect } from '../components/DatasetSelect.tsx';

/** More rows than this stop the stream: a browser tab is not the place for millions of rows. */
const MAX_ROWS = 200_000;

interface Hist {
  times: number[];
  counts: number[];
  bucket: number;
  note?: string;
}

export function Explore({ params, theme }: { params: Record<string, string>; theme: string }) {
  const s = useSession();
  const completion = useCompletionSchema();
  const dataset = params.dataset ?? s.datasets[0]?.name ?? '';
  const range: TimeRange = { from: params.from ?? '15m', to: params.to ?? 'now' };
  // The query as last set (URL, default, run); the editor holds the text being typed, read from `typed`.
  const [sql, setSql] = useState(params.q ?? '');
  const typed = useRef(sql);
  const [timeColumn, setTimeColumn] = useState<string | undefined>();
  const [fields, setFields] = useState<string[]>([]);
  const [columns, setColumns] = useState<string[]>([]);
  const rows = useRef<Row[]>([]);
  const [, setRowVersion] = useState(0);
  const [status, setStatus] = useState<{ state: 'idle' | 'running' | 'done' | 'cancelled' | 'error'; message?: string; ms?: number }>({ state: 'idle' });
  const [hist, setHist] = useState<Hist | null>(null);
  const running = useRef<AbortController | null>(null);
  const pendingRun = useRef(false);

  // Whenever the URL's dataset, query or range changes (a link, a zoom, a preset, Run): load the
  // dataset's time column, put the URL's query (or the dataset's default one) in the editor, and run.
  const [kick, setKick] = useState(0);
  useEffect(() => {
    if (!dataset) return;
    let live = true;
    s.schema(dataset).then(
      (sc) => {
        if (!live) return;
        setTimeColumn(sc.timeColumn);
        typed.current = params.q ?? defaultQuery(dataset, sc.timeColumn ?? 'p_timestamp');
        setSql(typed.current);
        pendingRun.current = true;
        setKick((k) => k + 1);
      },
      (e) => live && setStatus({ state: 'error', message: (e as Error).message }),
    );
    return () => {
      live = false;
    };
  }, [dataset, params.q, params.from, params.to]);
  useEffect(() => {
    if (pendingRun.current && timeColumn) {
      pendingRun.current = false;
      void run(typed.current);
    }
  }, [kick, timeColumn]);
  useEffect(() => () => running.current?.abort(), []);

  const setRoute = (p: Record<string, string | undefined>) => navigate('explore', { dataset, q: params.q, from: range.from, to: range.to, ...p }, true);

  async function run(text = sql) {
    running.current?.abort();
    const ctl = new AbortController();
    running.current = ctl;
    let bounds: { startMs: number; endMs: number };
    try {
      bounds = resolveRange(range);
    } catch (e) {
      setStatus({ state: 'error', message: (e as Error).message });
      return;
    }
    const req = { startTime: new Date(bounds.startMs).toISOString(), endTime: new Date(bounds.endMs).toISOString() };
    const started = performance.now();
    rows.current = [];
    setRowVersion((v) => v + 1);
    setStatus({ state: 'running' });
    void loadHistogram(text, req, bounds, ctl.signal);
    let frame = 0;
    // A run superseded by a newer one (running.current moved on) must not touch what the newer one
    // shows: not its rows, not its status (its cancellation is not the user's).
    const current = () => running.current === ctl;
    try {
      await s.api.queryStream({ query: text, ...req }, {
        onFields: (f) => {
          if (!current()) return;
          setFields(f);
          setColumns((prev) => (prev.length && prev.every((c) => f.includes(c)) && f.length === prev.length ? prev : defaultColumns(f, timeColumn)));
        },
        onRows: (batch) => {
          if (!current()) return;
          rows.current.push(...batch);
          if (rows.current.length >= MAX_ROWS) ctl.abort('limit');
          // One re-render per animation frame however fast rows arrive.
          if (!frame) frame = requestAnimationFrame(() => ((frame = 0), setRowVersion((v) => v + 1)));
        },
      }, ctl.signal);
      if (current()) setStatus({ state: 'done', ms: performance.now() - started });
    } catch (e) {
      if (!current()) return;
      if (ctl.signal.aborted) {
        const limit = ctl.signal.reason === 'limit';
        setStatus({ state: limit ? 'done' : 'cancelled', ms: performance.now() - started, message: limit ? `stopped at ${MAX_ROWS.toLocaleString('en-US')} rows: add a LIMIT or narrow the time range` : undefined });
      } else setStatus({ state: 'error', message: e instanceof ApiError ? `${e.status}: ${e.message}` : (e as Error).message });
    } finally {
      if (current()) {
        setRowVersion((v) => v + 1);
        running.current = null;
      }
    }
  }

  async function loadHistogram(text: string, req: { startTime: string; endTime: string }, b: { startMs: number; endMs: number }, signal: AbortSignal) {
    if (!timeColumn) return;
    const bucket = autoBucketSeconds(b.startMs, b.endMs);
    const toHist = (records: Row[], note?: string): Hist => {
      // Every bucket of the range, empty ones as zero, so bars sit where their time is.
      const byT = new Map(records.map((r) => [Math.floor((parseTimestamp(r.t) ?? 0) / 1000), Number(r.n)]));
      const first = Math.floor(b.startMs / 1000 / bucket) * bucket;
      const times: number[] = [];
      const counts: number[] = [];
      for (let t = first; t < b.endMs / 1000; t += bucket) {
        times.push(t);
        counts.push(byT.get(t) ?? 0);
      }
      return { times, counts, bucket, note };
    };
    try {
      const { records } = await s.api.query({ query: histogramSql({ query: text }, timeColumn, bucket), ...req }, signal);
      setHist(toHist(records));
    } catch (e) {
      if (signal.aborted) return;
      // The query's rows have no time column (an aggregate, a projection): show the dataset's events.
      const ds = firstDataset(text) ?? dataset;
      const sc = await s.schema(ds).catch(() => undefined);
      if (!sc?.timeColumn) return setHist(null);
      try {
        const { records } = await s.api.query({ query: histogramSql({ dataset: ds }, sc.timeColumn, bucket), ...req }, signal);
        setHist(toHist(records, `all events of ${ds} (the query's rows have no ${sc.timeColumn})`));
      } catch {
        setHist(null);
      }
    }
  }

  const onRun = (text = typed.current) => {
    typed.current = text;
    setSql(text);
    if (text !== params.q) setRoute({ q: text });
    else void run(text);
  };
  const zoom = (startMs: number, endMs: number) => setRoute({ q: typed.current, from: new Date(startMs).toISOString(), to: new Date(endMs).toISOString() });
  const timeColumns = useMemo(() => new Set([timeColumn ?? '', 'p_timestamp', 'time_unix_nano', 'span_start_time_unix_nano', 'span_end_time_unix_nano'].filter(Boolean)), [timeColumn]);
  const download = (kind: 'csv' | 'ndjson') => {
    const name = `${dataset || 'query'}-${new Date().toISOString().replace(/[:.]/g, '-')}.${kind}`;
    if (kind === 'csv') downloadText(name, toCsv(columns, rows.current), 'text/csv');
    else downloadText(name, toNdjson(columns, rows.current), 'application/x-ndjson');
  };

  return (
    <section class="page explore">
      <div class="toolbar">
        <DatasetSelect value={dataset} onChange={(d) => navigate('explore', { dataset: d, from: range.from, to: range.to })} />
        <TimeRangePicker value={range} onChange={(r) => setRoute({ q: typed.current, from: r.from, to: r.to })} />
        <span class="spacer" />
        {s.caps.filters && <SavedQueries dataset={dataset} sql={() => typed.current} range={range} onLoad={(q, r) => setRoute({ q, ...(r ?? {}) })} />}
      </div>
      <div class="editor-row">
        <SqlEditor value={sql} onChange={(t) => (typed.current = t)} onRun={onRun} schema={completion} defaultTable={dataset} />
        <div class="editor-actions">
          {status.state === 'running' ? (
            <button class="danger" onClick={() => running.current?.abort()} data-testid="cancel-query">
              Cancel
            </button>
          ) : (
            <button onClick={() => onRun()} data-testid="run-query" title="Ctrl/Cmd+Enter">
              Run
            </button>
          )}
          <span class="muted small">Ctrl/⌘+Enter</span>
        </div>
      </div>
      {status.state === 'error' && (
        <pre class="error query-error" role="alert" data-testid="query-error">
          {status.message}
        </pre>
      )}
      {hist && <Histogram times={hist.times} counts={hist.counts} bucketSeconds={hist.bucket} onZoom={zoom} theme={theme} note={hist.note} />}
      <div class="results-bar">
        <span data-testid="row-count" aria-live="polite">
          {rows.current.length.toLocaleString('en-US')} rows
          {status.state === 'running' && ' · running…'}
          {status.state === 'cancelled' && ' · cancelled'}
          {status.ms !== undefined && status.state !== 'running' && ` · ${Math.round(status.ms)} ms`}
          {status.message && status.state === 'done' && ` · ${status.message}`}
        </span>
        <span class="spacer" />
        {fields.length > 0 && <ColumnPicker fields={fields} columns={columns} onChange={setColumns} />}
        <button class="secondary" disabled={!rows.current.length} onClick={() => download('csv')}>
          CSV
        </button>
        <button class="secondary" disabled={!rows.current.length} onClick={() => download('ndjson')}>
          NDJSON
        </button>
      </div>
      {fields.length > 0 ? <ResultsTable columns={columns} rows={rows.current} timeColumns={timeColumns} /> : status.state === 'done' && <p class="muted">No rows.</p>}
    </section>
  );
}
