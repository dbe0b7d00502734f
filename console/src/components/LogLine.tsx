import type { ComponentChildren } from 'preact';
import type { Row } from '../lib/api.ts';
import { cellText } from '../lib/format.ts';
import { chips, isTraceColumn, levelClass, logTime, SPAN_ID, type LogLayout } from '../lib/logs.ts';
import { parseTimestamp } from '../lib/time.ts';

export type TraceHref = (traceId: string, atMs?: number) => string;

/** A cell's content: its text, or for a trace id a link to the trace (a span id: to its span in the trace). */
export function cellValue(row: Row, c: string, traceHref?: TraceHref, timeColumn?: string): ComponentChildren {
  const text = cellText(row[c]);
  const traceCol = isTraceColumn(c) ? c : SPAN_ID.includes(c) ? Object.keys(row).find(isTraceColumn) : undefined;
  const traceId = traceCol ? cellText(row[traceCol]) : '';
  if (!traceHref || !text || !traceId) return text;
  const own = traceCol === c;
  const href = traceHref(traceId, timeColumn ? parseTimestamp(row[timeColumn]) : undefined) + (own ? '' : `&span=${encodeURIComponent(text)}`);
  return (
    <a href={href} title={own ? 'Open this trace' : 'Open this span in its trace'} data-testid={own ? 'trace-id-link' : 'span-id-link'} onClick={(e) => e.stopPropagation()}>
      {text}
    </a>
  );
}

interface Props {
  row: Row;
  columns: string[];
  layout: LogLayout;
  traceHref?: TraceHref;
  /** Before the time (an expand button). */
  children?: ComponentChildren;
  onDblClick?: () => void;
}

/** One row as a log line: time, level (coloured), message, then the other fields as `key=value` chips. */
export function LogLine({ row, columns, layout, traceHref, children, onDblClick }: Props) {
  const lvl = layout.level ? row[layout.level] : undefined;
  return (
    <div class="row-cells log-line" onDblClick={onDblClick}>
      {children}
      <time class="log-time">{logTime(row, layout)}</time>
      {layout.level && (
        <span class={`level level-${levelClass(lvl)}`} data-testid="log-level">
          {cellText(lvl) || '—'}
        </span>
      )}
      {layout.message && (
        <span class="log-msg" data-testid="log-message">
          {cellText(row[layout.message])}
        </span>
      )}
      {chips(row, columns, layout).map(([k]) => (
        <span class="chip" key={k} data-testid="log-chip">
          <span class="chip-k">{k}</span>=<span class="chip-v">{cellValue(row, k, traceHref, layout.time)}</span>
        </span>
      ))}
    </div>
  );
}
