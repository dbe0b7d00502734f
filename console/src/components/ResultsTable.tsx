import { useLayoutEffect, useReducer, useRef, useState } from 'preact/hooks';
import { Virtualizer, elementScroll, measureElement, observeElementOffset, observeElementRect } from '@tanstack/virtual-core';
import type { Row } from '../lib/api.ts';
import { cellText } from '../lib/format.ts';
import { copyText } from '../lib/clipboard.ts';

interface Props {
  /** Columns to show, in order. */
  columns: string[];
  rows: Row[];
  /** Columns holding times (a little wider). */
  timeColumns?: Set<string>;
}

const ROW_HEIGHT = 30;

function widthOf(col: string, timeColumns?: Set<string>): number {
  if (timeColumns?.has(col)) return 240;
  if (col === 'body' || col === 'msg' || col === 'message') return 420;
  return Math.min(360, Math.max(110, col.length * 9 + 40));
}

/**
 * A table that renders only the rows in view (virtual scrolling with @tanstack/virtual-core), so 100k
 * rows scroll as smoothly as 100. A row opens to its full JSON, where each value can be copied.
 */
export function ResultsTable({ columns, rows, timeColumns }: Props) {
  const scroller = useRef<HTMLDivElement>(null);
  const [, rerender] = useReducer((n: number) => n + 1, 0);
  const [open, setOpen] = useState<Set<number>>(() => new Set());
  const [copied, setCopied] = useState<string | null>(null);

  const virt = useRef<Virtualizer<HTMLDivElement, HTMLDivElement> | null>(null);
  const options = {
    count: rows.length,
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

  const widths = columns.map((c) => widthOf(c, timeColumns));
  const total = widths.reduce((a, b) => a + b, 0) + 36;
  const template = `36px ${widths.map((w) => `${w}px`).join(' ')}`;

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

  return (
    <div class="results" role="table" aria-label="Query results" aria-rowcount={rows.length + 1}>
      <div class="results-scroll" ref={scroller} tabIndex={0} data-testid="results-scroll">
        <div class="results-head" role="row" style={{ gridTemplateColumns: template, width: `${total}px` }}>
          <span role="columnheader" class="cell">
            <span class="sr-only">Expand</span>
          </span>
          {columns.map((c) => (
            <span role="columnheader" class="cell" title={c} key={c}>
              {c}
            </span>
          ))}
        </div>
        <div class="results-body" style={{ height: `${v.getTotalSize()}px`, width: `${total}px` }}>
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
                <div class="row-cells" style={{ gridTemplateColumns: template }}>
                  <button class="expand" aria-expanded={isOpen} aria-label={`${isOpen ? 'Close' : 'Open'} row ${item.index + 1}`} onClick={() => toggle(item.index)}>
                    {isOpen ? '▾' : '▸'}
                  </button>
                  {columns.map((c) => (
                    <span role="cell" class="cell" key={c} title={cellText(row[c])} onDblClick={() => toggle(item.index)}>
                      {cellText(row[c])}
                    </span>
                  ))}
                </div>
                {isOpen && (
                  <div class="row-json" data-testid="row-json">
                    <div class="row-json-actions">
                      <button class="small" onClick={() => copy(`row-${item.index}`, row)}>
                        {copied === `row-${item.index}` ? 'Copied' : 'Copy row as JSON'}
                      </button>
                    </div>
                    <dl>
                      {Object.entries(row)
                        .filter(([, val]) => val !== null && val !== undefined)
                        .map(([k, val]) => (
                          <div class="kv" key={k}>
                            <dt>{k}</dt>
                            <dd>
                              <code>{typeof val === 'string' ? val : JSON.stringify(val)}</code>
                              <button class="link small" aria-label={`Copy ${k}`} onClick={() => copy(`${item.index}:${k}`, val)}>
                                {copied === `${item.index}:${k}` ? 'copied' : 'copy'}
                              </button>
                            </dd>
                          </div>
                        ))}
                    </dl>
                  </div>
                )}
              </div>
            );
          })}
        </div>
      </div>
    </div>
  );
}
