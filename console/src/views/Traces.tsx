import { useEffect, useState } from 'preact/hooks';
import type { Row } from '../lib/api.ts';
import { useSession } from '../lib/store.ts';
import { navigate } from '../lib/route.ts';
import { ident, literal } from '../lib/sql.ts';
import { formatDurationNs, formatTime, parseTimestamp, resolveRange, type TimeRange } from '../lib/time.ts';
import { DatasetSelect } from '../components/DatasetSelect.tsx';
import { TimeRangePicker } from '../components/TimeRangePicker.tsx';
import { Waterfall } from '../components/Waterfall.tsx';

interface Search {
  service: string;
  name: string;
  minMs: string;
  status: string;
}

const STATUS: Record<string, string> = { error: '2', ok: '1', unset: '0' };

export function Traces({ params }: { params: Record<string, string> }) {
  const s = useSession();
  const traceSets = s.datasets.filter((d) => d.kind === 'otel-traces');
  // A link from a log names the trace but not always its dataset: the first trace dataset holding it.
  const [foundIn, setFoundIn] = useState<string | undefined>();
  const dataset = params.dataset && s.kindOf(params.dataset) === 'otel-traces' ? params.dataset : foundIn ?? traceSets[0]?.name ?? '';
  useEffect(() => {
    if (params.dataset || !params.trace || traceSets.length < 2) return;
    let live = true;
    (async () => {
      for (const d of traceSets) {
        const { records } = await s.api.query({ query: `SELECT count(*) AS n FROM ${ident(d.name)} WHERE span_trace_id = ${literal(params.trace)}`, ...req() }).catch(() => ({ records: [] as Row[] }));
        if (!live) return;
        if (Number(records[0]?.n) > 0) return setFoundIn(d.name);
      }
    })();
    return () => {
      live = false;
    };
  }, [params.trace, params.dataset]);
  const range: TimeRange = { from: params.from ?? '1h', to: params.to ?? 'now' };
  const [search, setSearch] = useState<Search>({ service: params.service ?? '', name: params.name ?? '', minMs: params.min ?? '', status: params.status ?? '' });
  const [services, setServices] = useState<string[]>([]);
  const [hasService, setHasService] = useState(false);
  const [traces, setTraces] = useState<Row[] | null>(null);
  const [error, setError] = useState('');
  const [version, setVersion] = useState(0);

  const req = () => {
    const b = resolveRange(range);
    return { startTime: new Date(b.startMs).toISOString(), endTime: new Date(b.endMs).toISOString() };
  };

  useEffect(() => {
    if (!dataset) return;
    s.schema(dataset).then(async (sc) => {
      const has = sc.fields.some((f) => f.name === 'service.name');
      setHasService(has);
      if (!has) return setServices([]);
      const { records } = await s.api.query({ query: `SELECT DISTINCT "service.name" AS s FROM ${ident(dataset)} ORDER BY 1 LIMIT 500`, ...req() });
      setServices(records.map((r) => String(r.s ?? '')).filter(Boolean));
    }).catch((e) => setError((e as Error).message));
  }, [dataset, range.from, range.to]);

  useEffect(() => {
    if (!dataset) return;
    const ctl = new AbortController();
    const query = traceSearchSql(dataset, search, hasService);
    setError('');
    s.api.query({ query, ...req() }, ctl.signal).then(
      (r) => setTraces(r.records),
      (e) => !ctl.signal.aborted && setError((e as Error).message),
    );
    return () => ctl.abort();
  }, [dataset, range.from, range.to, version, hasService]);

  const go = (p: Record<string, string | undefined>) => navigate('traces', { dataset, from: range.from, to: range.to, trace: params.trace, ...p }, true);

  if (!dataset) return <section class="page"><h1>Traces</h1><p>No <code>otel-traces</code> dataset yet. Point an OpenTelemetry Collector or SDK at <code>{location.origin}/v1/traces</code> (see Datasets for a snippet).</p></section>;

  return (
    <section class="page traces">
      <div class="toolbar">
        <DatasetSelect value={dataset} kinds={['otel-traces']} onChange={(d) => navigate('traces', { dataset: d, from: range.from, to: range.to })} />
        <TimeRangePicker value={range} onChange={(r) => go({ from: r.from, to: r.to })} />
      </div>
      <SearchForm search={search} setSearch={setSearch} services={hasService ? services : undefined} onSubmit={() => setVersion((v) => v + 1)} />
      {error && <pre class="error" role="alert">{error}</pre>}
      <div class="traces-layout">
        <TraceList traces={traces} selected={params.trace} onPick={(trace) => go({ trace })} />
        {params.trace && <Waterfall key={`${dataset}:${params.trace}`} dataset={dataset} traceId={params.trace} spanId={params.span} range={range} onClose={() => go({ trace: undefined, span: undefined })} />}
      </div>
    </section>
  );
}

/** The search over the last traces: every span matching the conditions, its whole trace summarised. */
function traceSearchSql(dataset: string, search: Search, hasService: boolean): string {
  const conds: string[] = [];
  if (search.service && hasService) conds.push(`"service.name" = ${literal(search.service)}`);
  if (search.name) conds.push(`span_name ILIKE ${literal(`%${search.name}%`)}`);
  if (search.minMs && Number(search.minMs) > 0) conds.push(`span_duration_ns >= ${Math.round(Number(search.minMs) * 1e6)}`);
  if (STATUS[search.status]) conds.push(`span_status_code = ${STATUS[search.status]}`);
  const ds = ident(dataset);
  const svc = hasService ? '"service.name"' : 'NULL';
  return `SELECT span_trace_id AS trace_id, min(span_start_time_unix_nano) AS started,
  epoch_ns(max(span_end_time_unix_nano)) - epoch_ns(min(span_start_time_unix_nano)) AS duration_ns,
  count(*) AS spans, arg_min(span_name, span_start_time_unix_nano) AS root_name,
  arg_min(${svc}, span_start_time_unix_nano) AS root_service, max(span_status_code = 2)::INT AS errors
FROM ${ds}
WHERE span_trace_id IN (SELECT span_trace_id FROM ${ds}${conds.length ? ` WHERE ${conds.join(' AND ')}` : ''})
GROUP BY span_trace_id ORDER BY started DESC LIMIT 100`;
}

/** The search form; `services` is undefined when the dataset has no `service.name` column. */
function SearchForm({ search, setSearch, services, onSubmit }: { search: Search; setSearch: (s: Search) => void; services?: string[]; onSubmit: () => void }) {
  return (
    <form class="toolbar search" onSubmit={(e) => (e.preventDefault(), onSubmit())} aria-label="Search traces">
      {services && (
        <span class="field">
          <label for="trace-service">Service</label>
          <select id="trace-service" value={search.service} onChange={(e) => setSearch({ ...search, service: (e.target as HTMLSelectElement).value })}>
            <option value="">any</option>
            {services.map((x) => <option key={x}>{x}</option>)}
          </select>
        </span>
      )}
      <span class="field">
        <label for="trace-name">Span name contains</label>
        <input id="trace-name" value={search.name} onInput={(e) => setSearch({ ...search, name: (e.target as HTMLInputElement).value })} />
      </span>
      <span class="field">
        <label for="trace-min">Min duration (ms)</label>
        <input id="trace-min" type="number" min="0" step="any" value={search.minMs} onInput={(e) => setSearch({ ...search, minMs: (e.target as HTMLInputElement).value })} />
      </span>
      <span class="field">
        <label for="trace-status">Status</label>
        <select id="trace-status" value={search.status} onChange={(e) => setSearch({ ...search, status: (e.target as HTMLSelectElement).value })}>
          <option value="">any</option>
          <option value="error">error</option>
          <option value="ok">ok</option>
          <option value="unset">unset</option>
        </select>
      </span>
      <button type="submit">Search</button>
    </form>
  );
}

function TraceList({ traces, selected, onPick }: { traces: Row[] | null; selected?: string; onPick: (trace: string) => void }) {
  return (
    <div class="table-wrap trace-list">
      <table data-testid="trace-list">
        <thead>
          <tr>
            <th scope="col">Start (UTC)</th>
            <th scope="col">Root span</th>
            <th scope="col" class="num">Duration</th>
            <th scope="col" class="num">Spans</th>
          </tr>
        </thead>
        <tbody>
          {(traces ?? []).map((t) => (
            <tr key={String(t.trace_id)} class={selected === t.trace_id ? 'selected' : ''}>
              <td>{formatTime(parseTimestamp(t.started) ?? 0, true)}</td>
              <td>
                <a href="#" onClick={(e) => (e.preventDefault(), onPick(String(t.trace_id)))} data-testid="trace-link">
                  {t.root_service ? <span class="muted">{String(t.root_service)} · </span> : null}
                  {String(t.root_name ?? t.trace_id)}
                </a>
                {Number(t.errors) > 0 && <span class="badge error-badge">error</span>}
              </td>
              <td class="num">{formatDurationNs(Number(t.duration_ns))}</td>
              <td class="num">{String(t.spans)}</td>
            </tr>
          ))}
          {traces && traces.length === 0 && (
            <tr>
              <td colSpan={4} class="muted">No traces match in this time range.</td>
            </tr>
          )}
        </tbody>
      </table>
    </div>
  );
}
