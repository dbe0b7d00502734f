import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { ApiError, type Row } from '../lib/api.ts';
import { useSession, type Session } from '../lib/store.ts';
import { navigate } from '../lib/route.ts';
import { addCondition, defaultColumns, defaultQuery, firstDataset, histogramSql, stripTrailingLimit, valueCondition } from '../lib/sql.ts';
import { autoBucketSeconds, histogramBars, resolveRange, type TimeRange } from '../lib/time.ts';
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
import { SavedQueries } from '../components/SavedQueries.tsx';
import { DatasetSelect } from '../components/DatasetSelect.tsx';
import { FieldList, type FieldStatsAnswer } from '../components/FieldList.tsx';
import { EmptyRange, ResultsBar, RunButton, ZoomButtons, type EmptyHint, type RunStatus } from '../components/ExploreBars.tsx';

/** More rows than this stop the stream: a browser tab is not the place for millions of rows. */
const MAX_ROWS = 200_000;

interface Hist {
  times: number[];
  counts: number[];
  bucket: number;
  note?: string;
}

/** Stops the run in progress, if any: nothing it still sends is shown. */
function stopRun(running: { current: AbortController | null }): void {
  running.current?.abort();
  running.current = null;
}

/** A query run: its rows streamed in, its status, histogram, field statistics and the empty-range hint. */
function useQueryRun(dataset: string, range: TimeRange, timeColumn: string | undefined) {
  const s = useSession();
  const [fields, setFields] = useState<string[]>([]);
  const [columns, setColumns] = useState<string[]>([]);
  const rows = useRef<Row[]>([]);
  const [, setRowVersion] = useState(0);
  const [status, setStatus] = useState<RunStatus>({ state: 'idle' });
  const [hist, setHist] = useState<Hist | null>(null);
  const [stats, setStats] = useState<{ answer: FieldStatsAnswer | null; note?: string }>({ answer: null });
  const [empty, setEmpty] = useState<EmptyHint | null>(null);
  const running = useRef<AbortController | null>(null);
  useEffect(() => () => running.current?.abort(), []);
  // A run's fields, columns and statistics are its dataset's: gone the moment another dataset is shown, and
  // its run stopped (fields it sends before the next run starts would pass as the new dataset's).
  useEffect(() => {
    stopRun(running);
    setFields([]);
    setColumns([]);
    setStats({ answer: null });
  }, [dataset]);

  async function run(text: string) {
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
    const histogram = loadHistogram(s, { text, dataset, timeColumn }, req, bounds, ctl.signal).then((h) => h !== undefined && !ctl.signal.aborted && setHist(h));
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
    if (rows.current.length === 0) void whereEventsAre(s, firstDataset(text) ?? dataset).then(setEmpty);
    setStats((prev) => ({ answer: prev.answer, note: 'counting…' }));
    void fieldStats(s, text, req, ctl.signal).then((st) => st && running.current === null && setStats(st));
  }

  return { run, fields, columns, setColumns, rows, status, setStatus, hist, stats, empty, running };
}

/** The field list's statistics of a run's query; undefined when the run was aborted. */
async function fieldStats(s: Session, text: string, req: { startTime: string; endTime: string }, signal: AbortSignal): Promise<{ answer: FieldStatsAnswer | null; note?: string } | undefined> {
  try {
    const answer = await s.api.json<FieldStatsAnswer>('/api/v1/field-stats', {
      method: 'POST',
      signal,
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ query: stripTrailingLimit(text), ...req, top: 5 }),
    });
    return signal.aborted ? undefined : { answer };
  } catch (e) {
    return signal.aborted ? undefined : { answer: null, note: `(no statistics: ${(e as Error).message})` };
  }
}

/** Where a dataset has its events, to say so beside an empty range's "No rows". */
async function whereEventsAre(s: Session, ds: string): Promise<EmptyHint> {
  const where = await firstAndLast(s, ds).catch(() => ({}) as { firstMs?: number; lastMs?: number });
  return { dataset: ds, ...where };
}

/**
 * The histogram of a run: its rows' times per bucket; when its rows have no time column (an aggregate, a
 * projection), the dataset's events. Undefined: nothing to draw (no time column known, or superseded).
 */
async function loadHistogram(s: Session, run: { text: string; dataset: string; timeColumn?: string }, req: { startTime: string; endTime: string }, b: { startMs: number; endMs: number }, signal: AbortSignal): Promise<Hist | null | undefined> {
  const { text, dataset, timeColumn } = run;
  if (!timeColumn) return undefined;
  const bucket = autoBucketSeconds(b.startMs, b.endMs);
  const toHist = (records: Row[], note?: string): Hist => ({ ...histogramBars(records, b.startMs, b.endMs, bucket), bucket, note });
  try {
    const { records } = await s.api.query({ query: histogramSql({ query: text }, timeColumn, bucket), ...req }, signal);
    return toHist(records);
  } catch {
    if (signal.aborted) return undefined;
    // The query's rows have no time column (an aggregate, a projection): show the dataset's events.
    const ds = firstDataset(text) ?? dataset;
    const sc = await s.schema(ds).catch(() => undefined);
    if (!sc?.timeColumn) return null;
    try {
      const { records } = await s.api.query({ query: histogramSql({ dataset: ds }, sc.timeColumn, bucket), ...req }, signal);
      return toHist(records, `all events of ${ds} (the query's rows have no ${sc.timeColumn})`);
    } catch {
      return null;
    }
  }
}

interface LoadAndRun {
  setTimeColumn: (c: string | undefined) => void;
  setTypes: (t: Map<string, Field>) => void;
  setSql: (q: string) => void;
  onError: (message: string) => void;
  run: (text: string) => Promise<void>;
}

function useLoadAndRun(dataset: string, params: Record<string, string>, typed: { current: string }, on: LoadAndRun, timeColumn: string | undefined) {
  const s = useSession();
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
        on.setTimeColumn(sc.timeColumn);
        on.setTypes(new Map(sc.fields.map((f) => [f.name, f])));
        typed.current = params.q ?? defaultQuery(dataset, sc.timeColumn ?? 'p_timestamp');
        on.setSql(typed.current);
        pendingRun.current = true;
        setKick((k) => k + 1);
      },
      (e) => live && on.onError((e as Error).message),
    );
    return () => {
      live = false;
    };
  }, [dataset, params.q, params.from, params.to]);
  useEffect(() => {
    if (pendingRun.current && timeColumn) {
      pendingRun.current = false;
      void on.run(typed.current);
    }
  }, [kick, timeColumn]);
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
  const q = useQueryRun(dataset, range, timeColumn);
  // The schema's names are the dataset's too (the next dataset's arrive with its schema).
  useEffect(() => setTypes(new Map()), [dataset]);
  const { fields, columns, setColumns, rows, status, hist, stats, empty, running } = q;
  const [mode, setMode] = useState<'auto' | 'logs' | 'table'>('auto');
  // Ranges zoomed out of, newest last: Back returns to them.
  const zooms = useRef<TimeRange[]>([]);

  useLoadAndRun(dataset, params, typed, { setTimeColumn, setTypes, setSql, onError: (message) => q.setStatus({ state: 'error', message }), run: q.run }, timeColumn);

  const setRoute = (p: Record<string, string | undefined>) => navigate('explore', { dataset, q: params.q, from: range.from, to: range.to, ...p }, true);
  // A saved query runs over its own dataset: its hit count and field list are that dataset's.
  const loadSaved = (q: string, r: TimeRange | undefined, d: string) => {
    if (d && d !== dataset) zooms.current = [];
    setRoute({ q, ...(r ?? {}), ...(d ? { dataset: d } : {}) });
  };

  const onRun = (text = typed.current) => {
    typed.current = text;
    setSql(text);
    if (text !== params.q) setRoute({ q: text });
    else void q.run(text);
  };
  const setRange = (r: TimeRange) => setRoute({ q: typed.current, from: r.from, to: r.to });
  const { zoom, back, zoomOut } = zoomActions(zooms.current, range, setRange);
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

  return (
    <section class="page explore">
      <div class="toolbar">
        <DatasetSelect value={dataset} onChange={(d) => ((zooms.current = []), navigate('explore', { dataset: d, from: range.from, to: range.to }))} />
        <TimeRangePicker value={range} onChange={setRange} />
        <ZoomButtons back={back} canGoBack={zooms.current.length > 0} zoomOut={zoomOut} />
        <span class="spacer" />
        {s.caps.filters && <SavedQueries dataset={dataset} sql={() => typed.current} range={range} onLoad={(q, r, d) => loadSaved(q, r, d)} />}
      </div>
      <div class="editor-row">
        <SqlEditor value={sql} onChange={(t) => (typed.current = t)} onRun={onRun} schema={completion} defaultTable={dataset} />
        <RunButton running={status.state === 'running'} onCancel={() => running.current?.abort()} onRun={() => onRun()} />
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
          <ResultsBar status={status} rowCount={rows.current.length} mode={shownMode} setMode={setMode} fields={fields} columns={columns} setColumns={setColumns} download={download} />
          {status.state === 'done' && rows.current.length === 0 && <EmptyRange range={range} empty={empty} setRange={setRange} />}
          {fields.length > 0 && status.state !== 'error' && rows.current.length > 0 && (
            <ResultsTable columns={columns} rows={rows.current} timeColumn={timeColumn} mode={shownMode} layout={layout} traceHref={toTrace} />
          )}
        </div>
      </div>
    </section>
  );
}

/** Zoom in to a range, back to the one before, and out to twice as long around the same middle. */
function zoomActions(zooms: TimeRange[], range: TimeRange, setRange: (r: TimeRange) => void) {
  return {
    zoom: (startMs: number, endMs: number) => {
      zooms.push(range);
      setRange({ from: new Date(startMs).toISOString(), to: new Date(endMs).toISOString() });
    },
    back: () => {
      const prev = zooms.pop();
      if (prev) setRange(prev);
    },
    /** A range reaching the future ends now. */
    zoomOut: () => {
      const b = resolveRange(range);
      const span = b.endMs - b.startMs;
      const end = Math.min(Date.now(), b.endMs + span / 2);
      zooms.push(range);
      setRange({ from: new Date(end - 2 * span).toISOString(), to: range.to === 'now' || end >= Date.now() ? 'now' : new Date(end).toISOString() });
    },
  };
}
