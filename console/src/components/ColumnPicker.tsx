interface Props {
  fields: string[];
  /** Visible columns in order. */
  columns: string[];
  onChange: (columns: string[]) => void;
}

/** Which columns the table shows and in which order (checkboxes and move buttons: keyboard-friendly). */
export function ColumnPicker({ fields, columns, onChange }: Props) {
  const hidden = fields.filter((f) => !columns.includes(f));
  const move = (i: number, d: number) => {
    const next = [...columns];
    const j = i + d;
    if (j < 0 || j >= next.length) return;
    [next[i], next[j]] = [next[j], next[i]];
    onChange(next);
  };
  return (
    <details class="column-picker">
      <summary>
        Columns ({columns.length}/{fields.length})
      </summary>
      <div class="popover" role="group" aria-label="Columns">
        <div class="row">
          <button class="link small" onClick={() => onChange([...fields])}>
            All
          </button>
          <button class="link small" onClick={() => onChange(columns.slice(0, 1))}>
            Only first
          </button>
        </div>
        <ul>
          {columns.map((c, i) => (
            <li key={c}>
              <label>
                <input type="checkbox" checked onChange={() => onChange(columns.filter((x) => x !== c))} />
                {c}
              </label>
              <span class="spacer" />
              <button class="icon small" aria-label={`Move ${c} left`} disabled={i === 0} onClick={() => move(i, -1)}>
                ↑
              </button>
              <button class="icon small" aria-label={`Move ${c} right`} disabled={i === columns.length - 1} onClick={() => move(i, 1)}>
                ↓
              </button>
            </li>
          ))}
          {hidden.map((c) => (
            <li key={c}>
              <label>
                <input type="checkbox" checked={false} onChange={() => onChange([...columns, c])} />
                {c}
              </label>
            </li>
          ))}
        </ul>
      </div>
    </details>
  );
}
