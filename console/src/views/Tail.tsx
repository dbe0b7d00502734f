import { useEffect, useRef, useState } from 'preact/hooks';
import type { Row } from '../lib/api.ts';
import { useSession } from '../lib/store.ts';
import { navigate } from '../lib/route.ts';
import { ident } from '../lib/sql.ts';
import { formatTime, parseTimestamp } from '../lib/time.ts';
import { DatasetSelect } from '../components/DatasetSelect.tsx';

const POLL_MS = 2000;
const KEEP = 500;

/**
 * Live tail by polling: every 2 s a query asks for rows whose time is at or after the newest one
 * already shown (the start time moves forward), so each poll reads only recent files. Rows at that
 * exact instant are told apart by their content, so none shows twice.
 */
export function Tail({ params }: { params: Record<string, string> }) {
  const s = useSession();
  const dataset = params.dataset ?? s.datasets[0]?.name ?? '';
  const [filter, setFilter] = useState(params.where ?? '');
  const [applied, setApplied] = useState(params.where ?? '');
  const [paused, setPaused] = useState(false);
  const [rows, setRows] = useState<{ t: number; text: string }[]>([]);
  const [error, setError] = useState('');
  const cursor = useRef<{ ms: number; seen: Set<string> }>({ ms: Date.now() - 5 * 60_000, seen: new Set() });

  useEffect(() => {
    setRows([]);
    cursor.current = { ms: Date.now() - 5 * 60_000, seen: new Set() };
  }, [dataset, applied]);

  useEffect(() => {
    if (paused || !dataset) return;
    let live = true;
    let timer = 0;
    const ctl = new AbortController();
    const poll = async () => {
      try {
        const sc = await s.schema(dataset);
        const tc = sc.timeColumn ?? 'p_timestamp';
        const where = applied.trim() ? ` WHERE (${applied})` : '';
        const { records } = await s.api.query(
          {
            query: `SELECT * FROM ${ident(dataset)}${where} ORDER BY ${ident(tc)} DESC LIMIT ${KEEP}`,
            startTime: new Date(cursor.current.ms).toISOString(),
            // A little past now: a sender's clock a bit ahead must not hide its events.
            endTime: new Date(Date.now() + 60_000).toISOString(),
          },
          ctl.signal,
        );
        if (!live) return;
        setError('');
        const fresh: { t: number; text: string }[] = [];
        let newest = cursor.current.ms;
        for (const r of records as Row[]) {
          const t = parseTimestamp(r[tc]) ?? 0;
          const text = JSON.stringify(r);
          if (t === cursor.current.ms && cursor.current.seen.has(text)) continue;
          fresh.push({ t, text });
          if (t > newest) newest = t;
        }
        const seen = newest === cursor.current.ms ? cursor.current.seen : new Set<string>();
        for (const f of fresh) if (f.t === newest) seen.add(f.text);
        cursor.current = { ms: newest, seen };
        if (fresh.length) setRows((prev) => [...fresh, ...prev].slice(0, KEEP));
      } catch (e) {
        if (live) setError((e as Error).message);
      }
      if (live) timer = window.setTimeout(poll, POLL_MS);
    };
    void poll();
    return () => {
      live = false;
      ctl.abort();
      clearTimeout(timer);
    };
  }, [dataset, applied, paused]);

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
          <label for="tail-filter">Filter (SQL condition)</label>
          <input id="tail-filter" placeholder="level = 'error'" value={filter} onInput={(e) => setFilter((e.target as HTMLInputElement).value)} />
        </form>
        <button onClick={() => setPaused(!paused)} aria-pressed={paused} data-testid="tail-pause">
          {paused ? 'Resume' : 'Pause'}
        </button>
      </div>
      <p class="muted small" aria-live="polite">
        {paused ? 'Paused.' : `Polling every ${POLL_MS / 1000} s.`} {rows.length} events shown (newest first, the last {KEEP} kept).
      </p>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <ol class="tail-list" data-testid="tail-list" aria-label="Events">
        {rows.map((r, i) => (
          <li key={`${r.t}:${i}:${r.text.length}`}>
            <time>{formatTime(r.t, true)}</time>
            <code>{r.text}</code>
          </li>
        ))}
        {rows.length === 0 && <li class="muted">Waiting for events…</li>}
      </ol>
    </section>
  );
}
