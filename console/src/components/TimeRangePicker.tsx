import { useState } from 'preact/hooks';
import { RELATIVE_PRESETS, describeRange, resolveRange, type TimeRange } from '../lib/time.ts';

interface Props {
  value: TimeRange;
  onChange: (r: TimeRange) => void;
}

/** `2026-11-23T10:04` (the datetime-local format), in UTC. */
const toInput = (ms: number) => new Date(ms).toISOString().slice(0, 16);
const fromInput = (s: string) => `${s.length === 16 ? `${s}:00` : s}Z`;

/** Relative presets (5m … 30d) and an absolute from/to, both in UTC. */
export function TimeRangePicker({ value, onChange }: Props) {
  const [open, setOpen] = useState(false);
  const relative = value.to === 'now' && (RELATIVE_PRESETS as readonly string[]).includes(value.from);
  let resolved: { startMs: number; endMs: number } | undefined;
  try {
    resolved = resolveRange(value);
  } catch {
    resolved = undefined;
  }
  const [from, setFrom] = useState(() => (resolved ? toInput(resolved.startMs) : ''));
  const [to, setTo] = useState(() => (resolved ? toInput(resolved.endMs) : ''));
  const [error, setError] = useState('');

  const apply = (e: Event) => {
    e.preventDefault();
    const r = { from: fromInput(from), to: fromInput(to) };
    try {
      resolveRange(r);
      setError('');
      setOpen(false);
      onChange(r);
    } catch (err) {
      setError((err as Error).message);
    }
  };

  return (
    <div class="time-range">
      <label class="sr-only" for="time-preset">
        Time range
      </label>
      <select
        id="time-preset"
        data-testid="time-preset"
        value={relative ? value.from : 'custom'}
        onChange={(e) => {
          const v = (e.target as HTMLSelectElement).value;
          if (v === 'custom') setOpen(true);
          else onChange({ from: v, to: 'now' });
        }}
      >
        {RELATIVE_PRESETS.map((p) => (
          <option value={p} key={p}>
            Last {p}
          </option>
        ))}
        <option value="custom">{relative ? 'Absolute…' : describeRange(value)}</option>
      </select>
      <button class="secondary" aria-expanded={open} onClick={() => setOpen(!open)} title="Absolute time range (UTC)">
        UTC range
      </button>
      {open && (
        <form class="popover" onSubmit={apply} aria-label="Absolute time range">
          <label>
            From (UTC)
            <input type="datetime-local" value={from} required onInput={(e) => setFrom((e.target as HTMLInputElement).value)} />
          </label>
          <label>
            To (UTC)
            <input type="datetime-local" value={to} required onInput={(e) => setTo((e.target as HTMLInputElement).value)} />
          </label>
          {error && <p class="error">{error}</p>}
          <div class="row">
            <button type="submit">Apply</button>
            <button type="button" class="secondary" onClick={() => setOpen(false)}>
              Cancel
            </button>
          </div>
        </form>
      )}
    </div>
  );
}
