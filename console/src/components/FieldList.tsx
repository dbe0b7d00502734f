import { useState } from 'preact/hooks';
import type { Field } from '../lib/schema.ts';

export interface FieldStatsAnswer {
  total: number;
  fields: { name: string; present: number; distinct: number; top: { value: string; count: number }[] }[];
}

interface Props {
  /** The query's columns, then the dataset's other columns. */
  names: string[];
  types: Map<string, Field>;
  stats: FieldStatsAnswer | null;
  /** The stats' state: shown as a note (a failure does not hide the list). */
  note?: string;
  columns: string[];
  onToggleColumn: (name: string) => void;
  onFilter: (name: string, value: string, exclude: boolean) => void;
}

const pct = (n: number, total: number) => (total ? `${Math.round((n / total) * 1000) / 10}%` : '—');

/**
 * Discover's field list: every column with its type and the share of the query's rows that have it;
 * a column opens to its top values in the current range (computed by the server over every row, not
 * the rows on screen), each one a filter to add or exclude; a toggle shows it as a table column.
 */
export function FieldList({ names, types, stats, note, columns, onToggleColumn, onFilter }: Props) {
  const [search, setSearch] = useState('');
  const [open, setOpen] = useState<string | null>(null);
  const by = new Map((stats?.fields ?? []).map((f) => [f.name, f]));
  const shown = names.filter((n) => n.toLowerCase().includes(search.toLowerCase()));
  return (
    <aside class="field-list" aria-label="Fields" data-testid="field-list">
      <input type="search" placeholder="Search fields" aria-label="Search fields" value={search} onInput={(e) => setSearch((e.target as HTMLInputElement).value)} />
      <p class="muted small">
        {stats ? `${stats.total.toLocaleString('en-US')} rows in range` : ''}
        {note ? ` ${note}` : ''}
      </p>
      <ul>
        {shown.map((name) => {
          const f = by.get(name);
          const t = types.get(name);
          const isOpen = open === name;
          const visible = columns.includes(name);
          return (
            <li key={name} class={isOpen ? 'open' : ''} data-testid={`field-${name}`}>
              <div class="field-row">
                <button class="field-name" data-testid="field-name" aria-expanded={isOpen} onClick={() => setOpen(isOpen ? null : name)} title={`${name}: ${t?.type ?? 'computed'}`}>
                  <span class={`type type-${t?.kind ?? 'other'}`} aria-label={t?.type ?? 'computed'}>
                    {typeLetter(t)}
                  </span>
                  <span class="name">{name}</span>
                </button>
                <span class="share muted small" data-testid="field-share" title="rows that have a value">
                  {stats ? pct(f?.present ?? 0, stats.total) : ''}
                </span>
                <button class={`icon small col-toggle${visible ? ' on' : ''}`} aria-pressed={visible} aria-label={`${visible ? 'Hide' : 'Show'} column ${name}`} onClick={() => onToggleColumn(name)}>
                  {visible ? '−' : '+'}
                </button>
              </div>
              {isOpen && (
                <div class="field-top" data-testid="field-top">
                  <p class="muted small">
                    {t?.type ?? 'computed'} · {f ? `${f.distinct.toLocaleString('en-US')} distinct` : 'no values in range'}
                  </p>
                  {(f?.top ?? []).map((v) => (
                    <div class="top-value" key={v.value}>
                      <span class="bar" style={{ width: `${stats?.total ? (v.count / stats.total) * 100 : 0}%` }} />
                      <span class="v" title={v.value}>
                        {v.value}
                      </span>
                      <span class="muted small">{pct(v.count, stats?.total ?? 0)}</span>
                      <button class="icon small" aria-label={`Filter for ${name} = ${v.value}`} title="Filter for this value" onClick={() => onFilter(name, v.value, false)}>
                        ⊕
                      </button>
                      <button class="icon small" aria-label={`Filter out ${name} = ${v.value}`} title="Filter out this value" onClick={() => onFilter(name, v.value, true)}>
                        ⊖
                      </button>
                    </div>
                  ))}
                </div>
              )}
            </li>
          );
        })}
      </ul>
    </aside>
  );
}

function typeLetter(t?: Field): string {
  switch (t?.kind) {
    case 'text':
      return 't';
    case 'number':
      return '#';
    case 'time':
      return '◷';
    case 'bool':
      return 'b';
    case 'list':
      return '[]';
    default:
      return '?';
  }
}
