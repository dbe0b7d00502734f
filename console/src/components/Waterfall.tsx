import { useEffect, useState } from 'preact/hooks';
import { useSession } from '../lib/store.ts';
import { ident, literal } from '../lib/sql.ts';
import { buildWaterfall, parseJsonList, spanAttributes, type Waterfall as WF, type WaterfallSpan } from '../lib/traces.ts';
import { formatDurationNs, parseTimestampNs, resolveRange, type TimeRange } from '../lib/time.ts';
import { cellText } from '../lib/format.ts';
import { TraceLogs, useTraceLogs } from './TraceLogs.tsx';

interface Props {
  dataset: string;
  traceId: string;
  /** The span to select first (a link from a log's span id). */
  spanId?: string;
  range: TimeRange;
  onClose: () => void;
}

/** One trace: its spans as bars on a shared time axis, indented under their parents; a span opens to its details. */
export function Waterfall({ dataset, traceId, spanId, range, onClose }: Props) {
  const s = useSession();
  const [wf, setWf] = useState<WF | null>(null);
  const [selected, setSelected] = useState<string | null>(null);
  const [error, setError] = useState('');

  useEffect(() => {
    // Spans of a trace may start a little before the range that found it: look an hour either side.
    const b = resolveRange(range);
    s.api
      .query({
        query: `SELECT * FROM ${ident(dataset)} WHERE span_trace_id = ${literal(traceId)} ORDER BY span_start_time_unix_nano LIMIT 5000`,
        startTime: new Date(b.startMs - 3_600_000).toISOString(),
        endTime: new Date(b.endMs + 3_600_000).toISOString(),
      })
      .then(
        (r) => {
          const w = buildWaterfall(r.records);
          setWf(w);
          setSelected(w.spans.find((x) => x.id === spanId)?.id ?? w.spans[0]?.id ?? null);
        },
        (e) => setError((e as Error).message),
      );
  }, [dataset, traceId, spanId]);

  const span = wf?.spans.find((x) => x.id === selected);
  const startMs = wf ? Number(wf.startNs / 1_000_000n) : undefined;
  const endMs = wf && startMs !== undefined ? startMs + Math.ceil(wf.totalNs / 1e6) : undefined;
  const logs = useTraceLogs(traceId, startMs, endMs);
  return (
    <section class="waterfall" aria-label={`Trace ${traceId}`} data-testid="waterfall">
      <div class="page-head">
        <h2>
          Trace <code>{traceId}</code>
        </h2>
        <span class="spacer" />
        {wf && <span class="muted">{wf.spans.length} spans · {formatDurationNs(wf.totalNs)}</span>}
        <button class="icon" aria-label="Close trace" onClick={onClose}>
          ✕
        </button>
      </div>
      {error && <pre class="error">{error}</pre>}
      {wf && (
        <ol class="wf-rows" aria-label="Spans">
          {wf.spans.map((sp) => (
            <li key={sp.id}>
              <button class={`wf-row${sp.id === selected ? ' selected' : ''}`} onClick={() => setSelected(sp.id)} aria-pressed={sp.id === selected} data-testid="wf-span">
                <span class="wf-label" style={{ paddingLeft: `${sp.depth * 14 + 4}px` }} title={String(sp.row.span_name)}>
                  {sp.row['service.name'] ? <span class="muted">{String(sp.row['service.name'])} </span> : null}
                  {String(sp.row.span_name ?? sp.id)}
                </span>
                <span class="wf-track">
                  <span
                    class={`wf-bar${sp.error ? ' err' : ''}`}
                    style={{ left: `${(sp.offsetNs / wf.totalNs) * 100}%`, width: `max(2px, ${(sp.durationNs / wf.totalNs) * 100}%)` }}
                  />
                </span>
                <span class="wf-dur">{formatDurationNs(sp.durationNs)}</span>
              </button>
            </li>
          ))}
        </ol>
      )}
      {span && wf && <SpanDetails span={span} traceStartNs={wf.startNs} />}
      {span && startMs !== undefined && endMs !== undefined && <TraceLogs {...logs} spanId={span.id} startMs={startMs} endMs={endMs} />}
      {startMs !== undefined && endMs !== undefined && <TraceLogs {...logs} startMs={startMs} endMs={endMs} />}
    </section>
  );
}

function SpanDetails({ span, traceStartNs }: { span: WaterfallSpan; traceStartNs: bigint }) {
  const at = (t: unknown) => {
    const ns = parseTimestampNs(t);
    return ns === undefined ? '' : `+${formatDurationNs(Number(ns - traceStartNs))}`;
  };
  const events = parseJsonList(span.row.span_events);
  const links = parseJsonList(span.row.span_links);
  return (
    <div class="span-details" data-testid="span-details">
      <h3>{String(span.row.span_name)}</h3>
      <p class="muted small">
        span <code>{span.id}</code>
        {span.row.span_parent_span_id ? (
          <>
            {' '}
            · parent <code>{String(span.row.span_parent_span_id)}</code>
          </>
        ) : null}{' '}
        · {formatDurationNs(span.durationNs)} · starts +{formatDurationNs(span.offsetNs)}
      </p>
      <h4>Attributes</h4>
      <dl class="kv-list">
        {spanAttributes(span.row).map(([k, v]) => (
          <div class="kv" key={k}>
            <dt>{k}</dt>
            <dd>
              <code>{cellText(v)}</code>
            </dd>
          </div>
        ))}
      </dl>
      <h4>Events ({events.length})</h4>
      {events.length ? (
        <ul class="plain">
          {events.map((e, i) => (
            <li key={i}>
              <strong>{String(e.name ?? 'event')}</strong> <span class="muted small">{at(e.time_unix_nano)}</span>
              {e.attributes && Object.keys(e.attributes as object).length ? <code class="block">{JSON.stringify(e.attributes)}</code> : null}
            </li>
          ))}
        </ul>
      ) : (
        <p class="muted small">None.</p>
      )}
      <h4>Links ({links.length})</h4>
      {links.length ? (
        <ul class="plain">
          {links.map((l, i) => (
            <li key={i}>
              <code class="block">{JSON.stringify(l)}</code>
            </li>
          ))}
        </ul>
      ) : (
        <p class="muted small">None.</p>
      )}
    </div>
  );
}
