import { useLayoutEffect, useMemo, useReducer, useRef, useState } from 'preact/hooks';
import { Virtualizer, elementScroll, measureElement, observeElementOffset, observeElementRect } from '@tanstack/virtual-core';
import type { Row } from '../lib/api.ts';
import { autoWidth, cellText, MIN_W } from '../lib/format.ts';
import { copyText } from '../lib/clipboard.ts';
import type { LogLayout } from '../lib/logs.ts';
import { cellValue, LogLine, type TraceHref } from './LogLine.tsx';

interface Props {
  /** Columns to show, in order. */
  columns: string[];
  rows: Row[];
  /** The rows' time column (a trace link opens around a row's time). */
  timeColumn?: string;
  /** `logs`: one scannable line per row (time, level, message, then `key=value` chips). */
  mode?: 'table' | 'logs';
  layout?: LogLayout;
  /** Where a trace id in a row leads. */
  traceHref?: TraceHref;
}

const ROW_HEIGHT = 30;

/** The virtualizer of the rows in `scroller`: closed rows are ROW_HEIGHT, open ones measured. */
function useRowVirtualizer(count: number, scroller: { current: HTMLDivElement | null }, open: Set<number>) {
  const [, rerender] = useReducer((n: number) => n + 1, 0);
  const virt = useRef<Virtualizer<HTMLDivElement, HTMLDivElement> | null>(null);
  const options = {
    count,
    getScrollElement: () => scroller.current,
    estimateSize: (i: number) => (open.has(i) ? ROW_HEIGHT + 200 : ROW_HEIGHT),
    overscan: 12,
    scrollToFn: elementScroll,
    observeElementRect,
    observeElementOffset,
    measureElement,
    onChange: () => rerender(0),
  };
  if (!virt.current) virt.current = new Virtualizer<HTMLDivElement, HTMLDivElement>(options);
  else virt.current.setOptions({ ...virt.current.options, ...options });
  const v = virt.current;
  useLayoutEffect(() => v._didMount(), []);
  useLayoutEffect(() => v._willUpdate());
  return v;
}
/**
 * A table that renders only the rows in view (virtual scrolling with @tanstack/virtual-core), so 100k
 * rows scroll as smoothly as 100. Columns are as wide as their values (the last one takes the room
 * left) and can be resized by dragging their header's edge. A row opens to its full JSON, where each
 * value can be copied.
 */
export function ResultsTable({ columns, rows, timeColumn, mode = 'table', layout = {}, traceHref }: Props) {
  const scroller = useRef<HTMLDivElement>(null);
  const [open, setOpen] = useState<Set<number>>(() => new Set());
  const [copied, setCopied] = useState<string | null>(null);
  const [resized, setResized] = useState<Record<string, number>>({});

  const v = useRowVirtualizer(rows.length, scroller, open);

  // Sized once the first rows are in (not again as more stream in: columns must not jump).
  const sized = rows.length > 0;
  const auto = useMemo(() => Object.fromEntries(columns.map((c) => [c, autoWidth(c, rows)])), [columns.join('\u0000'), sized]);
  const widths = columns.map((c) => resized[c] ?? auto[c] ?? MIN_W);
  const total = widths.reduce((a, b) => a + b, 0) + 36;
  const template = `36px ${widths.map((w, i) => (i === widths.length - 1 ? `minmax(${w}px, 1fr)` : `${w}px`)).join(' ')}`;
  const logs = mode === 'logs';
  const sizeStyle = logs ? { width: '100%' } : { minWidth: `${total}px`, width: '100%' };

  const startResize = (col: string, e: PointerEvent) => {
    e.preventDefault();
    const el = e.currentTarget as HTMLElement;
    el.setPointerCapture(e.pointerId);
    const x0 = e.clientX;
    const w0 = resized[col] ?? auto[col] ?? MIN_W;
    const move = (ev: PointerEvent) => setResized((r) => ({ ...r, [col]: Math.max(40, Math.round(w0 + ev.clientX - x0)) }));
    const up = () => {
      el.removeEventListener('pointermove', move);
      el.removeEventListener('pointerup', up);
    };
    el.addEventListener('pointermove', move);
    el.addEventListener('pointerup', up);
  };
  const resizeBy = (col: string, d: number) => setResized((r) => ({ ...r, [col]: Math.max(40, (r[col] ?? auto[col] ?? MIN_W) + d) }));

  const toggle = (i: number) => {
    const next = new Set(open);
    if (next.has(i)) {
      next.delete(i);
      v.resizeItem(i, ROW_HEIGHT);
    } else next.add(i);
    setOpen(next);
  };
  const copy = async (label: string, value: unknown) => {
    await copyText(cellText(value));
    setCopied(label);
    setTimeout(() => setCopied((c) => (c === label ? null : c)), 1500);
  };
  const value = (row: Row, c: string) => cellValue(row, c, traceHref, timeColumn);

  return (
    <div class={`results${logs ? ' logs' : ''}`} role="table" aria-label="Query results" aria-rowcount={rows.length + 1}>
      <div class="results-scroll" ref={scroller} tabIndex={0} data-testid="results-scroll">
        {!logs && <HeaderRow columns={columns} style={{ gridTemplateColumns: template, ...sizeStyle }} startResize={startResize} resizeBy={resizeBy} />}
        <div class="results-body" style={{ height: `${v.getTotalSize()}px`, ...sizeStyle }}>
          {v.getVirtualItems().map((item) => {
            const row = rows[item.index];
            const isOpen = open.has(item.index);
            return (
              <div
                key={item.key}
                data-index={item.index}
                // Closed rows are exactly ROW_HEIGHT: only an open row (its JSON) is measured, so
                // scrolling through 100k rows never re-lays-out the list.
                ref={isOpen ? v.measureElement : undefined}
                class={`results-row${item.index % 2 ? ' odd' : ''}`}
                style={{ transform: `translateY(${item.start}px)` }}
                role="row"
                aria-rowindex={item.index + 2}
                data-testid="result-row"
              >
                <RowLine row={row} index={item.index} isOpen={isOpen} toggle={toggle} logs={logs} columns={columns} layout={layout} traceHref={traceHref} template={template} value={value} />
                {isOpen && <RowJson row={row} index={item.index} copied={copied} copy={copy} value={value} />}
              </div>
            );
          })}
        </div>
      </div>
    </div>
  );
}

function HeaderRow({ columns, style, startResize, resizeBy }: { columns: string[]; style: Record<string, string | undefined>; startResize: (col: string, e: PointerEvent) => void; resizeBy: (col: string, d: number) => void }) {
  return (
    <div class="results-head" role="row" style={style}>
      <span role="columnheader" class="cell">
        <span class="sr-only">Expand</span>
      </span>
      {columns.map((c) => (
        <span role="columnheader" class="cell" title={c} key={c} data-testid="column-header">
          <span class="col-name">{c}</span>
          <span
            class="col-resize"
            role="separator"
            aria-orientation="vertical"
            aria-label={`Resize ${c}`}
            tabIndex={0}
            data-testid={`resize-${c}`}
            onPointerDown={(e) => startResize(c, e as unknown as PointerEvent)}
            onKeyDown={(e) => (e.key === 'ArrowLeft' ? resizeBy(c, -20) : e.key === 'ArrowRight' ? resizeBy(c, 20) : undefined)}
          />
        </span>
      ))}
    </div>
  );
}

interface RowJsonProps {
  row: Row;
  index: number;
  copied: string | null;
  copy: (label: string, value: unknown) => void;
  value: (row: Row, c: string) => ReturnType<typeof cellValue>;
}

/** An open row: its full JSON, each value with a copy button. */
function RowJson({ row, index, copied, copy, value }: RowJsonProps) {
  return (
    <div class="row-json" data-testid="row-json">
      <div class="row-json-actions">
        <button class="small" onClick={() => copy(`row-${index}`, row)}>
          {copied === `row-${index}` ? 'Copied' : 'Copy row as JSON'}
        </button>
      </div>
      <dl>
        {Object.entries(row)
          .filter(([, val]) => val !== null && val !== undefined)
          .map(([k, val]) => (
            <div class="kv" key={k}>
              <dt>{k}</dt>
              <dd>
                <code>{typeof val === 'string' ? value(row, k) : JSON.stringify(val)}</code>
                <button class="link small" aria-label={`Copy ${k}`} onClick={() => copy(`${index}:${k}`, val)}>
                  {copied === `${index}:${k}` ? 'copied' : 'copy'}
                </button>
              </dd>
            </div>
          ))}
      </dl>
    </div>
  );
}

interface RowLineProps {
  row: Row;
  index: number;
  isOpen: boolean;
  toggle: (i: number) => void;
  logs: boolean;
  columns: string[];
  layout: LogLayout;
  traceHref?: TraceHref;
  template: string;
  value: (row: Row, c: string) => ReturnType<typeof cellValue>;
}

/** A row's visible line: a log line, or the cells of the table's columns. */
function RowLine({ row, index, isOpen, toggle, logs, columns, layout, traceHref, template, value }: RowLineProps) {
  const expand = (
    <button class="expand" aria-expanded={isOpen} aria-label={`${isOpen ? 'Close' : 'Open'} row ${index + 1}`} onClick={() => toggle(index)}>
      {isOpen ? '▾' : '▸'}
    </button>
  );
  if (logs) {
    return (
      <LogLine row={row} columns={columns} layout={layout} traceHref={traceHref} onDblClick={() => toggle(index)}>
        {expand}
      </LogLine>
    );
  }
  return (
    <div class="row-cells" style={{ gridTemplateColumns: template }}>
      {expand}
      {columns.map((c) => (
        <span role="cell" class="cell" key={c} title={cellText(row[c])} onDblClick={() => toggle(index)}>
          {value(row, c)}
        </span>
      ))}
    </div>
  );
}
