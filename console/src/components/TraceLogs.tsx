import { useEffect, useState } from 'preact/hooks';
import type { Row } from '../lib/api.ts';
import { useSession } from '../lib/store.ts';
import { formatHash } from '../lib/route.ts';
import { ident, literal } from '../lib/sql.ts';
import { defaultColumns } from '../lib/sql.ts';
import { logLayout, SPAN_ID, TRACE_ID } from '../lib/logs.ts';
import { LogLine } from './LogLine.tsx';

/** Log datasets looked at for a trace's logs (one small query each, one after another). */
const MAX_DATASETS = 20;
const MAX_LOGS = 200;
/** Logs are often written a little before or after the spans' own times. */
const SLACK_MS = 15 * 60_000;

export interface TraceLogSet {
  dataset: string;
  timeColumn?: string;
  traceColumn: string;
  spanColumn?: string;
  fields: string[];
  rows: Row[];
  query: string;
}

/** The logs of one trace in every log dataset this key can read that has a trace id column. */
export function useTraceLogs(traceId: string, startMs: number | undefined, endMs: number | undefined): { sets: TraceLogSet[]; loading: boolean; error: string } {
  const s = useSession();
  const [state, setState] = useState<{ sets: TraceLogSet[]; loading: boolean; error: string }>({ sets: [], loading: true, error: '' });
  useEffect(() => {
    if (startMs === undefined || endMs === undefined) return;
    let live = true;
    const ctl = new AbortController();
    (async () => {
      const sets: TraceLogSet[] = [];
      const candidates = s.datasets.filter((d) => d.kind === 'otel-logs' || d.kind === 'json').slice(0, MAX_DATASETS);
      let error = '';
      for (const d of candidates) {
        try {
          const sc = await s.schema(d.name);
          const names = sc.fields.map((f) => f.name);
          const traceColumn = TRACE_ID.find((c) => names.includes(c));
          if (!traceColumn) continue;
          const order = sc.timeColumn ? ` ORDER BY ${ident(sc.timeColumn)}` : '';
          const query = `SELECT * FROM ${ident(d.name)} WHERE ${ident(traceColumn)} = ${literal(traceId)}${order} LIMIT ${MAX_LOGS}`;
          const { records } = await s.api.query({ query, startTime: new Date(startMs - SLACK_MS).toISOString(), endTime: new Date(endMs + SLACK_MS).toISOString() }, ctl.signal);
          if (records.length) sets.push({ dataset: d.name, timeColumn: sc.timeColumn, traceColumn, spanColumn: SPAN_ID.find((c) => names.includes(c)), fields: names, rows: records, query });
        } catch (e) {
          if (ctl.signal.aborted) return;
          error = (e as Error).message;
        }
        if (!live) return;
        setState({ sets: [...sets], loading: true, error });
      }
      if (live) setState({ sets, loading: false, error });
    })();
    return () => {
      live = false;
      ctl.abort();
    };
  }, [traceId, startMs, endMs]);
  return state;
}

/** Log lines of a trace (or of one of its spans), grouped by dataset, each group openable in Explore. */
export function TraceLogs({ sets, loading, error, spanId, startMs, endMs }: { sets: TraceLogSet[]; loading: boolean; error: string; spanId?: string; startMs: number; endMs: number }) {
  const shown = sets
    .map((set) => ({ set, rows: spanId ? set.rows.filter((r) => set.spanColumn && String(r[set.spanColumn] ?? '') === spanId) : set.rows }))
    .filter((x) => x.rows.length);
  const total = shown.reduce((a, x) => a + x.rows.length, 0);
  return (
    <div class="trace-logs" data-testid={spanId ? 'span-logs' : 'trace-logs'}>
      <h4>
        Logs {spanId ? 'of this span' : 'of this trace'} ({loading ? `${total}…` : total})
      </h4>
      {error && <p class="error small">{error}</p>}
      {!loading && total === 0 && <p class="muted small">None in the log datasets this key can read.</p>}
      {shown.map(({ set, rows }) => {
        const layout = logLayout(set.fields, set.timeColumn);
        const columns = defaultColumns(set.fields, set.timeColumn);
        const href = formatHash('explore', { dataset: set.dataset, q: set.query, from: new Date(startMs - SLACK_MS).toISOString(), to: new Date(endMs + SLACK_MS).toISOString() });
        return (
          <div key={set.dataset} class="trace-log-set">
            <p class="small">
              <span class="badge">{set.dataset}</span> {rows.length} {rows.length === 1 ? 'line' : 'lines'} · <a href={href}>open in Explore</a>
            </p>
            <ul class="tail-list">
              {rows.map((r, i) => (
                <li key={i} data-testid="trace-log-row">
                  <LogLine row={r} columns={columns.filter((c) => c !== set.traceColumn)} layout={layout} />
                </li>
              ))}
            </ul>
          </div>
        );
      })}
    </div>
  );
}
