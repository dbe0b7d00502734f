import { formatTime, resolveRange, type TimeRange } from '../lib/time.ts';
import { ColumnPicker } from './ColumnPicker.tsx';

/* The Explore view's bars and buttons (views/Explore.tsx): run and cancel, zoom, the results bar, an empty range. */

export interface RunStatus {
  state: 'idle' | 'running' | 'done' | 'cancelled' | 'error';
  message?: string;
  ms?: number;
}

/** Where an empty range's dataset has its events, to say so next to "No rows". */
export interface EmptyHint {
  dataset: string;
  firstMs?: number;
  lastMs?: number;
}

export function ZoomButtons({ back, canGoBack, zoomOut }: { back: () => void; canGoBack: boolean; zoomOut: () => void }) {
  return (
    <>
      <button class="secondary" onClick={back} disabled={!canGoBack} data-testid="zoom-back" title="Back to the range before the last zoom">
        ← Back
      </button>
      <button class="secondary" onClick={zoomOut} data-testid="zoom-out" title="Twice as long a range">
        Zoom out
      </button>
    </>
  );
}

function rangeText(range: TimeRange): string {
  try {
    const b = resolveRange(range);
    return `${formatTime(b.startMs)} and ${formatTime(b.endMs)}`;
  } catch {
    return 'the chosen times';
  }
}

export function RunButton({ running, onCancel, onRun }: { running: boolean; onCancel: () => void; onRun: () => void }) {
  return (
    <div class="editor-actions">
      {running ? (
        <button class="danger" onClick={onCancel} data-testid="cancel-query">
          Cancel
        </button>
      ) : (
        <button onClick={onRun} data-testid="run-query" title="Ctrl/Cmd+Enter">
          Run
        </button>
      )}
      <span class="muted small">Ctrl/⌘+Enter</span>
    </div>
  );
}

interface ResultsBarProps {
  status: RunStatus;
  rowCount: number;
  mode: 'logs' | 'table';
  setMode: (m: 'logs' | 'table') => void;
  fields: string[];
  columns: string[];
  setColumns: (c: string[]) => void;
  download: (kind: 'csv' | 'ndjson') => void;
}

export function ResultsBar({ status, rowCount, mode, setMode, fields, columns, setColumns, download }: ResultsBarProps) {
  return (
    <div class="results-bar">
      <span data-testid="row-count" aria-live="polite">
        {rowCount.toLocaleString('en-US')} rows
        {status.state === 'running' && ' · running…'}
        {status.state === 'cancelled' && ' · cancelled'}
        {status.ms !== undefined && status.state !== 'running' && ` · ${Math.round(status.ms)} ms`}
        {status.message && status.state === 'done' && ` · ${status.message}`}
      </span>
      <span class="spacer" />
      <span class="segmented" role="group" aria-label="Show rows as">
        <button class={mode === 'logs' ? '' : 'secondary'} aria-pressed={mode === 'logs'} onClick={() => setMode('logs')} data-testid="mode-logs">
          Logs
        </button>
        <button class={mode === 'table' ? '' : 'secondary'} aria-pressed={mode === 'table'} onClick={() => setMode('table')} data-testid="mode-table">
          Table
        </button>
      </span>
      {fields.length > 0 && <ColumnPicker fields={fields} columns={columns} onChange={setColumns} />}
      <button class="secondary" disabled={!rowCount} onClick={() => download('csv')}>
        CSV
      </button>
      <button class="secondary" disabled={!rowCount} onClick={() => download('ndjson')}>
        NDJSON
      </button>
    </div>
  );
}

/** "No rows" in the range, and where the dataset's events are, with a link to that range. */
export function EmptyRange({ range, empty, setRange }: { range: TimeRange; empty: EmptyHint | null; setRange: (r: TimeRange) => void }) {
  return (
    <div class="empty-range" data-testid="empty-range">
      <p>No rows between {rangeText(range)}.</p>
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
  );
}
