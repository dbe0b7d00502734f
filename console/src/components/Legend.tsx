import { useState } from 'preact/hooks';

export interface LegendItem {
  label: string;
  color: string;
  /** What the series is ranked by (its mean over the range); null when it has no points. */
  value: number | null;
  shown: boolean;
}

interface Props {
  items: LegendItem[];
  /** How many series are drawn by default (the highest ranked). */
  top: number;
  showAll: boolean;
  onShowAll: (all: boolean) => void;
  onToggle: (index: number) => void;
  onHover: (index: number | null) => void;
  format: (v: number) => string;
}

/**
 * A legend that stays readable with many series: the top N drawn (the rest a click away), a search,
 * and hovering an entry highlights its line.
 */
export function Legend({ items, top, showAll, onShowAll, onToggle, onHover, format }: Props) {
  const [search, setSearch] = useState('');
  const order = items.map((it, i) => ({ it, i })).sort((a, b) => (b.it.value ?? -Infinity) - (a.it.value ?? -Infinity));
  const shown = order.filter(({ it }) => it.label.toLowerCase().includes(search.toLowerCase()));
  return (
    <div class="legend" data-testid="legend">
      <div class="row">
        {items.length > 8 && <input type="search" placeholder="Search series" aria-label="Search series" value={search} onInput={(e) => setSearch((e.target as HTMLInputElement).value)} />}
        <span class="muted small" data-testid="legend-summary">
          {items.length > top && !showAll ? `Top ${top} of ${items.length} series by average` : `${items.length} series`}
        </span>
        {items.length > top && (
          <button class="link small" onClick={() => onShowAll(!showAll)} data-testid="legend-all">
            {showAll ? `only the top ${top}` : 'show all'}
          </button>
        )}
      </div>
      <ul>
        {shown.map(({ it, i }) => (
          <li key={it.label} class={it.shown ? '' : 'off'} onMouseEnter={() => onHover(i)} onMouseLeave={() => onHover(null)}>
            <button aria-pressed={it.shown} onClick={() => onToggle(i)} title={it.label} data-testid="legend-item" onFocus={() => onHover(i)} onBlur={() => onHover(null)}>
              <span class="swatch" style={{ background: it.color }} />
              <span class="lname">{it.label}</span>
              <span class="lv">{it.value === null ? '—' : format(it.value)}</span>
            </button>
          </li>
        ))}
      </ul>
    </div>
  );
}
