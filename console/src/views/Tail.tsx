import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import type { Row } from '../lib/api.ts';
import { useSession } from '../lib/store.ts';
import { navigate } from '../lib/route.ts';
import { parseTimestamp } from '../lib/time.ts';
import { logLayout, traceHref } from '../lib/logs.ts';
import { defaultColumns } from '../lib/sql.ts';
import { DatasetSelect } from '../components/DatasetSelect.tsx';
import { LogLine } from '../components/LogLine.tsx';

/** Rows kept on screen, newest first. */
const KEEP = 500;
/** The rate is over this window. */
const RATE_WINDOW_MS = 60_000;
/** After a failed request, wait this long before the next (a server restarting, a bad filter). */
const RETRY_MS = 3000;

interface Answer {
  cursor: string;
  timeColumn: string;
  rows: Row[];
}

interface Line {
  id: number;
  t: number;
  row: Row;
}

/** Where the tail stands: the newest time shown, the rows shown at exactly that time, the server's cursor. */
interface Cursor {
  ms: number;
  seen: Set<string>;
  token?: string;
}

/** An answer's rows not shown yet, newest first, and the cursor after them. */
function freshRows(a: Answer, cursor: Cursor, nextId: () => number): { fresh: Line[]; cursor: Cursor } {
  const fresh: Line[] = [];
  let newest = cursor.ms;
  for (const r of a.rows) {
    const t = parseTimestamp(r[a.timeColumn]) ?? 0;
    const key = JSON.stringify(r);
    if (t === cursor.ms && cursor.seen.has(key)) continue;
    fresh.push({ id: nextId(), t, row: r });
    if (t > newest) newest = t;
  }
  const seen = newest === cursor.ms ? cursor.seen : new Set<string>();
  for (const f of fresh) if (f.t === newest) seen.add(JSON.stringify(f.row));
  fresh.sort((x, y) => y.t - x.t);
  return { fresh, cursor: { ms: newest, seen, token: a.cursor } };
}

/** The long-poll loop and what it has shown, restarted when the dataset or the filter changes. */
function useTail(dataset: string, applied: string, paused: boolean) {
  const s = useSession();
  const [lines, setLines] = useState<Line[]>([]);
  const [fields, setFields] = useState<string[]>([]);
  const [timeColumn, setTimeColumn] = useState<string | undefined>();
  const [error, setError] = useState('');
  const [arrivals, setArrivals] = useState<{ at: number; n: number }[]>([]);
  const cursor = useRef<Cursor>({ ms: Date.now() - 5 * 60_000, seen: new Set() });
  const nextId = useRef(0);
  const firstAnswer = useRef(true);

  useEffect(() => {
    setLines([]);
    setArrivals([]);
    firstAnswer.current = true;
    cursor.current = { ms: Date.now() - 5 * 60_000, seen: new Set() };
    s.schema(dataset).then((sc) => setFields(sc.fields.map((f) => f.name)), () => setFields([]));
  }, [dataset, applied]);

  useEffect(() => {
    if (paused || !dataset) return;
    let live = true;
    const ctl = new AbortController();
    const onAnswer = (a: Answer) => {
      setError('');
      setTimeColumn(a.timeColumn);
      const { fresh, cursor: next } = freshRows(a, cursor.current, () => nextId.current++);
      cursor.current = next;
      if (fresh.length) {
        setLines((prev) => [...fresh, ...prev].slice(0, KEEP));
        // What was there when the tail opened is history, not arrivals.
        if (!firstAnswer.current) setArrivals((prev) => [...prev.filter((x) => x.at > Date.now() - RATE_WINDOW_MS), { at: Date.now(), n: fresh.length }]);
      }
      firstAnswer.current = false;
    };
    (async () => {
      while (live) {
        try {
          const a = await s.api.json<Answer>('/api/v1/tail', {
            method: 'POST',
            signal: ctl.signal,
            headers: { 'Content-Type': 'application/json' },
            body: JSON.stringify({ dataset, where: applied.trim() || undefined, after: new Date(cursor.current.ms).toISOString(), cursor: cursor.current.token }),
          });
          if (!live) return;
          onAnswer(a);
        } catch (e) {
          if (!live) return;
          setError((e as Error).message);
          await new Promise((r) => setTimeout(r, RETRY_MS));
        }
      }
    })();
    return () => {
      live = false;
      ctl.abort();
    };
  }, [dataset, applied, paused]);
  return { lines, fields, timeColumn, error, arrivals };
}

/**
 * Live tail by long polling `POST /api/v1/tail`: each request waits on the server until the dataset
 * has new rows (or 25 s pass), then answers the rows at or after the newest one already shown. The
 * server runs one query per arrival, not one per second per viewer. Rows at that exact instant are
 * told apart by their content, so none shows twice.
 */
export function Tail({ params }: { params: Record<string, string> }) {
  const s = useSession();
  const dataset = params.dataset ?? s.datasets[0]?.name ?? '';
  const [filter, setFilter] = useState(params.where ?? '');
  const [applied, setApplied] = useState(params.where ?? '');
  const [paused, setPaused] = useState(false);
  const { lines, fields, timeColumn, error, arrivals } = useTail(dataset, applied, paused);

  // The rate is recomputed each second, so it falls back to zero when nothing arrives.
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, []);
  const recent = arrivals.filter((x) => x.at > now - RATE_WINDOW_MS).reduce((a, x) => a + x.n, 0);
  const rate = recent / (RATE_WINDOW_MS / 1000);

  // A column added since the schema was read still shows as a chip.
  const columns = useMemo(() => defaultColumns([...new Set([...fields, ...Object.keys(lines[0]?.row ?? {})])], timeColumn), [fields, timeColumn, lines[0]]);
  const layout = useMemo(() => logLayout(fields, timeColumn), [fields, timeColumn]);
  const traceSets = s.datasets.filter((d) => d.kind === 'otel-traces');
  const toTrace = (id: string, ms?: number) => traceHref(id, ms, traceSets.length === 1 ? traceSets[0].name : undefined);
  const newestId = useRef(-1);
  const freshFrom = newestId.current;
  useEffect(() => {
    newestId.current = lines[0]?.id ?? -1;
  });

  return (
    <section class="page tail">
      <div class="toolbar">
        <DatasetSelect value={dataset} onChange={(d) => navigate('tail', { dataset: d })} />
        <form
          class="field grow"
          onSubmit={(e) => {
            e.preventDefault();
            setApplied(filter);
            navigate('tail', { dataset, where: filter }, true);
          }}
        >
          <label for="tail-filter">Filter (SQL condition, Enter applies)</label>
          <input id="tail-filter" placeholder="level = 'error'" value={filter} onInput={(e) => setFilter((e.target as HTMLInputElement).value)} />
        </form>
        <button onClick={() => setPaused(!paused)} aria-pressed={paused} data-testid="tail-pause">
          {paused ? 'Resume' : 'Pause'}
        </button>
      </div>
      <p class="muted small tail-status" aria-live="polite">
        <span data-testid="tail-state">{paused ? 'Paused: new events wait on the server until you resume.' : 'Live: events appear as they arrive.'}</span>
        <span class="rate" data-testid="tail-rate">
          {rate.toFixed(rate < 10 ? 2 : 0)} events/s (last minute)
        </span>
        <span>{lines.length} shown (newest first, the last {KEEP} kept)</span>
        {applied.trim() && <span>filter: <code>{applied}</code></span>}
      </p>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <ol class="tail-list" data-testid="tail-list" aria-label="Events">
        {lines.map((l) => (
          <li key={l.id} class={freshFrom >= 0 && l.id > freshFrom ? 'fresh' : ''} data-testid="tail-row">
            <LogLine row={l.row} columns={columns} layout={layout} traceHref={toTrace} />
          </li>
        ))}
        {lines.length === 0 && <li class="muted">Waiting for events…</li>}
      </ol>
    </section>
  );
}
