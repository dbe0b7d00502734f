import { useEffect, useState } from 'preact/hooks';
import { useSession } from '../lib/store.ts';
import type { TimeRange } from '../lib/time.ts';

/** Parseable's saved filter (`/api/v1/filters`), the fields the console reads and writes. */
interface SavedFilter {
  filter_id?: string;
  filter_name: string;
  stream_name: string;
  query: { filter_type: string; filter_query?: string | null };
  time_filter?: { from: string; to: string } | null;
}

interface Props {
  dataset: string;
  /** The editor's current text. */
  sql: () => string;
  range: TimeRange;
  /** A saved query with its dataset (`stream_name`): loading one of another dataset switches to it. */
  onLoad: (sql: string, range: TimeRange | undefined, dataset: string) => void;
}

/**
 * Saved queries through the API's saved filters (Parseable's shape). Shown only when the server has
 * that endpoint; SQL filters only (the others are Parseable's query-builder forms).
 */
export function SavedQueries({ dataset, sql, range, onLoad }: Props) {
  const s = useSession();
  const [list, setList] = useState<SavedFilter[]>([]);
  const [name, setName] = useState('');
  const [error, setError] = useState('');
  const [version, setVersion] = useState(0);

  useEffect(() => {
    s.api.json<SavedFilter[]>('/api/v1/filters').then(
      (l) => setList((Array.isArray(l) ? l : []).filter((f) => f.query?.filter_type === 'sql' && f.query.filter_query)),
      (e) => setError((e as Error).message),
    );
  }, [version]);

  const save = async (e: Event) => {
    e.preventDefault();
    try {
      await s.api.send('POST', '/api/v1/filters', {
        stream_name: dataset,
        filter_name: name.trim(),
        query: { filter_type: 'sql', filter_query: sql() },
        time_filter: { from: range.from, to: range.to },
      });
      setName('');
      setVersion((v) => v + 1);
    } catch (err) {
      setError((err as Error).message);
    }
  };
  const remove = async (id: string) => {
    try {
      await s.api.send('DELETE', `/api/v1/filters/${encodeURIComponent(id)}`);
      setVersion((v) => v + 1);
    } catch (err) {
      setError((err as Error).message);
    }
  };

  return (
    <details class="saved-queries" data-testid="saved-queries">
      <summary>Saved queries ({list.length})</summary>
      <div class="popover">
        <ul>
          {list.map((f) => (
            <li key={f.filter_id}>
              <button class="link" onClick={() => onLoad(f.query.filter_query!, f.time_filter ?? undefined, f.stream_name)} title={f.query.filter_query ?? ''}>
                {f.filter_name}
              </button>
              <span class="muted small">{f.stream_name}</span>
              <span class="spacer" />
              {f.filter_id && (
                <button class="icon small" aria-label={`Delete saved query ${f.filter_name}`} onClick={() => remove(f.filter_id!)}>
                  ✕
                </button>
              )}
            </li>
          ))}
          {list.length === 0 && <li class="muted">None yet.</li>}
        </ul>
        <form class="row" onSubmit={save} aria-label="Save this query">
          <label class="sr-only" for="save-name">
            Name
          </label>
          <input id="save-name" placeholder="Name this query" required value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} />
          <button type="submit">Save</button>
        </form>
        {error && <p class="error">{error}</p>}
      </div>
    </details>
  );
}
