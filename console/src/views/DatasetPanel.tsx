import { useEffect, useState } from 'preact/hooks';
import { ApiError } from '../lib/api.ts';
import { useSession } from '../lib/store.ts';
import type { DatasetDetails } from '../lib/datasetInfo.ts';
import type { DatasetSchema } from '../lib/schema.ts';
import { formatBytes, formatCount } from '../lib/format.ts';
import { formatHash, navigate } from '../lib/route.ts';
import { Snippets } from '../components/Snippets.tsx';

interface Props {
  name: string;
  kind: string;
  details?: DatasetDetails;
  onChanged: () => void;
}

export function DatasetPanel({ name, kind, details, onChanged }: Props) {
  const s = useSession();
  const [schema, setSchema] = useState<DatasetSchema | null>(null);
  const [admin, setAdmin] = useState(false);
  const [error, setError] = useState('');

  useEffect(() => {
    s.schema(name, true).then(setSchema, (e) => setError((e as Error).message));
    setAdmin(s.canAdmin(name));
  }, [name]);

  const onDenied = (e: unknown) => {
    if (e instanceof ApiError && e.status === 403) setAdmin(false);
    setError((e as Error).message);
  };

  return (
    <section class="panel" aria-labelledby="panel-title" data-testid="dataset-panel">
      <div class="page-head">
        <h2 id="panel-title">{name}</h2>
        <span class={`badge kind-${kind}`}>{kind}</span>
        <span class="spacer" />
        <a class="button" href={formatHash('explore', { dataset: name })}>
          Explore
        </a>
        <a class="button secondary" href={formatHash('tail', { dataset: name })}>
          Live tail
        </a>
        {kind === 'otel-traces' && (
          <a class="button secondary" href={formatHash('traces', { dataset: name })}>
            Traces
          </a>
        )}
        {kind === 'otel-metrics' && (
          <a class="button secondary" href={formatHash('metrics', { dataset: name })}>
            Metrics
          </a>
        )}
      </div>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <Stats details={details} timeColumn={schema?.timeColumn} />
      {details?.count === 0 && (
        <div class="empty">
          <h3>No events yet</h3>
          <Snippets dataset={name} />
        </div>
      )}
      <div class="panel-grid">
        <div>
          <h3>Schema</h3>
          {schema ? <SchemaTable schema={schema} /> : <p class="muted">Loading…</p>}
        </div>
        <div>
          <Retention name={name} current={details?.retention} editable={admin} onDenied={onDenied} onSaved={onChanged} />
          {admin && <DeleteDataset name={name} onDenied={onDenied} onDeleted={() => (navigate('datasets', {}), onChanged())} />}
        </div>
      </div>
    </section>
  );
}

function Retention({ name, current, editable, onDenied, onSaved }: { name: string; current?: string; editable: boolean; onDenied: (e: unknown) => void; onSaved: () => void }) {
  const s = useSession();
  const [value, setValue] = useState(current && current !== 'forever' ? current : '');
  const [saved, setSaved] = useState('');
  useEffect(() => setValue(current && current !== 'forever' ? current : ''), [current]);

  const save = async (e: Event) => {
    e.preventDefault();
    setSaved('');
    try {
      const body = value.trim() ? [{ description: `keep ${value.trim()}`, action: 'delete', duration: value.trim() }] : [];
      await s.api.send('PUT', `/api/v1/logstream/${encodeURIComponent(name)}/retention`, body);
      setSaved(value.trim() ? `Events older than ${value.trim()} are deleted.` : 'Events are kept forever.');
      onSaved();
    } catch (err) {
      onDenied(err);
    }
  };
  return (
    <div>
      <h3>Retention</h3>
      <p>
        Currently: <strong data-testid="retention-current">{current ?? '—'}</strong>
      </p>
      {editable && (
        <form class="inline-form" onSubmit={save} aria-label="Retention">
          <label>
            Keep events for
            <input placeholder="e.g. 30d (empty: forever)" pattern="\d+\s*(ms|s|m|h|d)?" value={value} onInput={(e) => setValue((e.target as HTMLInputElement).value)} />
          </label>
          <button type="submit">Save</button>
          {saved && (
            <p class="ok" role="status">
              {saved}
            </p>
          )}
        </form>
      )}
    </div>
  );
}

function DeleteDataset({ name, onDenied, onDeleted }: { name: string; onDenied: (e: unknown) => void; onDeleted: () => void }) {
  const s = useSession();
  const [open, setOpen] = useState(false);
  const [typed, setTyped] = useState('');
  const [busy, setBusy] = useState(false);

  const remove = async (e: Event) => {
    e.preventDefault();
    if (typed !== name) return;
    setBusy(true);
    try {
      await s.api.send('DELETE', `/api/v1/logstream/${encodeURIComponent(name)}`);
      onDeleted();
    } catch (err) {
      onDenied(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <div class="danger-zone">
      <h3>Delete dataset</h3>
      {!open ? (
        <button class="danger" onClick={() => setOpen(true)}>
          Delete {name}…
        </button>
      ) : (
        <form onSubmit={remove} aria-label="Delete dataset">
          <p>
            This deletes every event of <strong>{name}</strong>, its schema and files. It cannot be undone.
          </p>
          <label for="confirm-delete">
            Type <code>{name}</code> to confirm
          </label>
          <input id="confirm-delete" autocomplete="off" value={typed} onInput={(e) => setTyped((e.target as HTMLInputElement).value)} autoFocus />
          <div class="row">
            <button type="submit" class="danger" disabled={typed !== name || busy}>
              Delete forever
            </button>
            <button type="button" class="secondary" onClick={() => (setOpen(false), setTyped(''))}>
              Cancel
            </button>
          </div>
        </form>
      )}
    </div>
  );
}

function Stats({ details, timeColumn }: { details?: DatasetDetails; timeColumn?: string }) {
  return (
    <dl class="stats">
      <div>
        <dt>Events</dt>
        <dd>{formatCount(details?.count)}</dd>
      </div>
      <div>
        <dt>Raw size</dt>
        <dd>{formatBytes(details?.rawBytes)}</dd>
      </div>
      <div>
        <dt>Stored (Parquet)</dt>
        <dd>{formatBytes(details?.storedBytes)}</dd>
      </div>
      <div>
        <dt>Files</dt>
        <dd>{formatCount(details?.files)}</dd>
      </div>
      <div>
        <dt>Time column</dt>
        <dd>
          <code>{timeColumn ?? '—'}</code>
        </dd>
      </div>
    </dl>
  );
}

function SchemaTable({ schema }: { schema: DatasetSchema }) {
  return (
    <div class="table-wrap schema">
      <table data-testid="schema-table">
        <thead>
          <tr>
            <th scope="col">Column</th>
            <th scope="col">Type</th>
          </tr>
        </thead>
        <tbody>
          {schema.fields.map((f) => (
            <tr key={f.name}>
              <td>
                <code>{f.name}</code>
              </td>
              <td>{f.type}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
