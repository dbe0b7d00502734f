import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { ApiError, type Row } from '../lib/api.ts';
import { useSession } from '../lib/store.ts';
import { navigate } from '../lib/route.ts';
import { addCondition, defaultColumns, defaultQuery, firstDataset, histogramSql, stripTrailingLimit, valueCondition } from '../lib/sql.ts';
import { autoBucketSeconds, formatTime, parseTimestamp, resolveRange, type TimeRange } from '../lib/time.ts';
import { toCsv, toNdjson } from '../lib/export.ts';
import { downloadText } from '../lib/clipboard.ts';
import { useCompletionSchema } from '../lib/useCompletion.ts';
import { firstAndLast } from '../lib/datasetInfo.ts';
import { logLayout, looksLikeLogs, traceHref } from '../lib/logs.ts';
import type { Field } from '../lib/schema.ts';
import { SqlEditor } from '../components/SqlEditor.tsx';
import { TimeRangePicker } from '../components/TimeRangePicker.tsx';
import { Histogram } from '../components/Histogram.tsx';
import { ResultsTable } from '../components/ResultsTable.tsx';
import { ColumnPicker } from '../components/ColumnPicker.tsx';
import { SavedQueries } from '../components/SavedQueries.tsx';
import { DatasetSelect } from '../components/DatasetSelect.tsx';
import { FieldList, type FieldStatsAnswer } from '../components/FieldList.tsx';

/** More rows than this stop the stream: a browser tab is not the place for millions of rows. */
const MAX_ROWS = 200_000;

interface Hist {
  times: number[];
  counts: number[];
  bucket: number;
  note?: string;
}

/** Where an empty range's dataset has its events, to say so next to "No rows". */
interface EmptyHint {
  dataset: string;
  firstMs?: number;
  lastMs?: number;
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
  const [types, setTypes] = useState<Map<string, Field>>(new Map());
  const [fields, setFields] = useState<string[]>([]);
  const [columns, setColumns] = useState<string[]>([]);
  const rows = useRef<Row[]>([]);
  const [, setRowVersion] = useState(0);
  const [status, setStatus] = useState<{ state: 'idle' | 'running' | 'done' | 'cancelled' | 'error'; message?: string; ms?: number }>({ state: 'idle' });
  const [hist, setHist] = useState<Hist | null>(null);
  const [stats, setStats] = useState<{ answer: FieldStatsAnswer | null; note?: string }>({ answer: null });
  const [empty, setEmpty] = useState<EmptyHint | null>(null);
  const [mode, setMode] = useState<'auto' | 'logs' | 'table'>('auto');
  const running = useRef<AbortController | null>(null);
  const pendingRun = useRef(false);
  // Ranges zoomed out of, newest last: Back returns to them.
  const zooms = useRef<TimeRange[]>([]);

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
        setTypes(new Map(sc.fields.map((f) => [f.name, f])));
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
  // A saved query runs over its own dataset: its hit count and field list are that dataset's.
  const loadSaved = (q: string, r: TimeRange | undefined, d: string) => {
    if (d && d !== dataset) zooms.current = [];
    setRoute({ q, ...(r ?? {}), ...(d ? { dataset: d } : {}) });
  };

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
    setEmpty(null);
    let frame = 0;
    // A run superseded by a newer one (running.current moved on) must not touch what the newer one
    // shows: not its rows, not its status (its cancellation is not the user's).
    const current = () => running.current === ctl;
    const histogram = loadHistogram(text, req, bounds, ctl.signal);
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
      } else {
        // A failed query shows its error alone: not the last query's histogram, columns or fields.
        ctl.abort('failed');
        setHist(null);
        setFields([]);
        setStats({ answer: null });
        setStatus({ state: 'error', message: e instanceof ApiError ? `${e.status}: ${e.message}` : (e as Error).message });
        return;
      }
    } finally {
      if (current()) {
        setRowVersion((v) => v + 1);
        running.current = null;
      }
    }
    // After the rows (and the histogram): the field list's statistics, and where an empty range's data is.
    await histogram;
    if (running.current !== null || ctl.signal.aborted) return;
    if (rows.current.length === 0) void explainEmpty(text);
    void loadFieldStats(text, req, ctl);
  }

  async function loadFieldStats(text: string, req: { startTime: string; endTime: string }, ctl: AbortController) {
    setStats((prev) => ({ answer: prev.answer, note: 'counting…' }));
    try {
      const answer = await s.api.json<FieldStatsAnswer>('/api/v1/field-stats', {
        method: 'POST',
        signal: ctl.signal,
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ query: stripTrailingLimit(text), ...req, top: 5 }),
      });
      if (running.current === null && !ctl.signal.aborted) setStats({ answer });
    } catch (e) {
      if (!ctl.signal.aborted) setStats({ answer: null, note: `(no statistics: ${(e as Error).message})` });
    }
  }

  async function explainEmpty(text: string) {
    const ds = firstDataset(text) ?? dataset;
    const where = await firstAndLast(s, ds).catch(() => ({}) as { firstMs?: number; lastMs?: number });
    setEmpty({ dataset: ds, ...where });
  }

  async function loadHistogram(text: string, req: { startTime: string; endTime: string }, b: { startMs: number; endMs: number }, signal: AbortSignal) {
    if (!timeColumn) return;
    const bucket = autoBucketSeconds(b.startMs, b.endMs);
    // Only while its run is not superseded and its query has not failed (both abort the run).
    const show = (h: Hist | null) => !signal.aborted && setHist(h);
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
      show(toHist(records));
    } catch {
      if (signal.aborted) return;
      // The query's rows have no time column (an aggregate, a projection): show the dataset's events.
      const ds = firstDataset(text) ?? dataset;
      const sc = await s.schema(ds).catch(() => undefined);
      if (!sc?.timeColumn) return show(null);
      try {
        const { records } = await s.api.query({ query: histogramSql({ dataset: ds }, sc.timeColumn, bucket), ...req }, signal);
        show(toHist(records, `all events of ${ds} (the query's rows have no ${sc.timeColumn})`));
      } catch {
        show(null);
      }
    }
  }

  const onRun = (text = typed.current) => {
    typed.current = text;
    setSql(text);
    if (text !== params.q) setRoute({ q: text });
    else void run(text);
  };
  const setRange = (r: TimeRange) => setRoute({ q: typed.current, from: r.from, to: r.to });
  const zoom = (startMs: number, endMs: number) => {
    zooms.current.push(range);
    setRange({ from: new Date(startMs).toISOString(), to: new Date(endMs).toISOString() });
  };
  const back = () => {
    const prev = zooms.current.pop();
    if (prev) setRange(prev);
  };
  /** Twice as long around the same middle; a range reaching the future ends now. */
  const zoomOut = () => {
    const b = resolveRange(range);
    const span = b.endMs - b.startMs;
    const end = Math.min(Date.now(), b.endMs + span / 2);
    zooms.current.push(range);
    setRange({ from: new Date(end - 2 * span).toISOString(), to: range.to === 'now' || end >= Date.now() ? 'now' : new Date(end).toISOString() });
  };
  const filter = (name: string, value: string, exclude: boolean) => onRun(addCondition(typed.current, valueCondition(name, types.get(name)?.kind, value, exclude)));
  const toggleColumn = (name: string) => setColumns((cols) => (cols.includes(name) ? cols.filter((c) => c !== name) : [...cols, name]));
  const download = (kind: 'csv' | 'ndjson') => {
    const name = `${dataset || 'query'}-${new Date().toISOString().replace(/[:.]/g, '-')}.${kind}`;
    if (kind === 'csv') downloadText(name, toCsv(columns, rows.current), 'text/csv');
    else downloadText(name, toNdjson(columns, rows.current), 'application/x-ndjson');
  };

  const layout = useMemo(() => logLayout(fields, timeColumn), [fields, timeColumn]);
  const shownMode = mode === 'auto' ? (looksLikeLogs(layout) ? 'logs' : 'table') : mode;
  const traceSets = s.datasets.filter((d) => d.kind === 'otel-traces');
  const toTrace = (id: string, ms?: number) => traceHref(id, ms, traceSets.length === 1 ? traceSets[0].name : undefined);
  // The time, level and message first, then the rest (Parseable's p_* last); the dataset's columns the query did not select after them.
  const fieldNames = useMemo(() => [...defaultColumns(fields, timeColumn), ...[...types.keys()].filter((n) => !fields.includes(n))], [fields, types, timeColumn]);
  const rangeText = (() => {
    try {
      const b = resolveRange(range);
      return `${formatTime(b.startMs)} and ${formatTime(b.endMs)}`;
    } catch {
      return 'the chosen times';
    }
  })();

  return (
    <section class="page explore">
      <div class="toolbar">
        <DatasetSelect value={dataset} onChange={(d) => ((zooms.current = []), navigate('explore', { dataset: d, from: range.from, to: range.to }))} />
        <TimeRangePicker value={range} onChange={setRange} />
        <button class="secondary" onClick={back} disabled={zooms.current.length === 0} data-testid="zoom-back" title="Back to the range before the last zoom">
          ← Back
        </button>
        <button class="secondary" onClick={zoomOut} data-testid="zoom-out" title="Twice as long a range">
          Zoom out
        </button>
        <span class="spacer" />
        {s.caps.filters && <SavedQueries dataset={dataset} sql={() => typed.current} range={range} onLoad={(q, r, d) => loadSaved(q, r, d)} />}
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
      {hist && status.state !== 'error' && <Histogram times={hist.times} counts={hist.counts} bucketSeconds={hist.bucket} onZoom={zoom} theme={theme} note={hist.note} />}
      <div class="explore-body">
        {status.state !== 'error' && fieldNames.length > 0 && (
          <FieldList names={fieldNames} types={types} stats={stats.answer} note={stats.note} columns={columns} onToggleColumn={toggleColumn} onFilter={filter} />
        )}
        <div class="explore-results">
          <div class="results-bar">
            <span data-testid="row-count" aria-live="polite">
              {rows.current.length.toLocaleString('en-US')} rows
              {status.state === 'running' && ' · running…'}
              {status.state === 'cancelled' && ' · cancelled'}
              {status.ms !== undefined && status.state !== 'running' && ` · ${Math.round(status.ms)} ms`}
              {status.message && status.state === 'done' && ` · ${status.message}`}
            </span>
            <span class="spacer" />
            <span class="segmented" role="group" aria-label="Show rows as">
              <button class={shownMode === 'logs' ? '' : 'secondary'} aria-pressed={shownMode === 'logs'} onClick={() => setMode('logs')} data-testid="mode-logs">
                Logs
              </button>
              <button class={shownMode === 'table' ? '' : 'secondary'} aria-pressed={shownMode === 'table'} onClick={() => setMode('table')} data-testid="mode-table">
                Table
              </button>
            </span>
            {fields.length > 0 && <ColumnPicker fields={fields} columns={columns} onChange={setColumns} />}
            <button class="secondary" disabled={!rows.current.length} onClick={() => download('csv')}>
              CSV
            </button>
            <button class="secondary" disabled={!rows.current.length} onClick={() => download('ndjson')}>
              NDJSON
            </button>
          </div>
          {status.state === 'done' && rows.current.length === 0 && (
            <div class="empty-range" data-testid="empty-range">
              <p>No rows between {rangeText}.</p>
              {empty && empty.lastMs !== undefined && empty.firstMs !== undefined ? (
                <p>
                  {empty.dataset} has events from <strong>{formatTime(empty.firstMs)}</strong> to <strong>{formatTime(empty.lastMs)}</strong> (UTC).{' '}
                  <button class="link" data-testid="show-data-range" onClick={() => setRange({ from: new Date(empty.firstMs! - 60_000).toISOString(), to: new Date(empty.lastMs! + 60_000).toISOString() })}>
                    Show that range
                  </button>
                </p>
              ) : empty ? (
                <p class="muted">{empty.dataset} has no stored events yet (rows just sent show within the flush interval).</p>
              ) : null}
            </div>
          )}
          {fields.length > 0 && status.state !== 'error' && rows.current.length > 0 && (
            <ResultsTable columns={columns} rows={rows.current} timeColumn={timeColumn} mode={shownMode} layout={layout} traceHref={toTrace} />
          )}
        </div>
      </div>
    </section>
  );
}
