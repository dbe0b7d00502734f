import { useState } from 'preact/hooks';
import { ApiError } from '../lib/api.ts';
import { useSession } from '../lib/store.ts';

const KINDS = ['json', 'otel-logs', 'otel-traces', 'otel-metrics'];

export function CreateDataset({ onCreated }: { onCreated: (name: string) => void }) {
  const s = useSession();
  const [open, setOpen] = useState(false);
  const [name, setName] = useState('');
  const [kind, setKind] = useState('json');
  const [error, setError] = useState('');

  const submit = async (e: Event) => {
    e.preventDefault();
    setError('');
    try {
      await s.api.send('PUT', `/api/v1/logstream/${encodeURIComponent(name)}`, undefined, kind === 'json' ? {} : { 'X-P-Log-Source': kind });
      setOpen(false);
      setName('');
      onCreated(name);
    } catch (err) {
      if (err instanceof ApiError && err.status === 403) s.caps.create = false;
      setError((err as Error).message);
    }
  };

  if (!open) {
    return (
      <button class="create-toggle" onClick={() => setOpen(true)}>
        + New dataset
      </button>
    );
  }
  return (
    <form class="card inline-form" onSubmit={submit} aria-label="New dataset">
      <label>
        Name
        <input required pattern="[A-Za-z][A-Za-z0-9_\-]{0,63}" value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} autoFocus />
      </label>
      <label>
        Kind
        <select value={kind} onChange={(e) => setKind((e.target as HTMLSelectElement).value)}>
          {KINDS.map((k) => (
            <option key={k}>{k}</option>
          ))}
        </select>
      </label>
      <button type="submit">Create</button>
      <button type="button" class="secondary" onClick={() => setOpen(false)}>
        Cancel
      </button>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
    </form>
  );
}
