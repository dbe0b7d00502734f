import { useSession } from '../lib/store.ts';

export function DatasetSelect({ value, onChange, kinds, id = 'dataset-select' }: { value: string; onChange: (name: string) => void; kinds?: string[]; id?: string }) {
  const s = useSession();
  const list = s.datasets.filter((d) => !kinds || kinds.includes(d.kind));
  return (
    <span class="field">
      <label for={id}>Dataset</label>
      <select id={id} value={value} onChange={(e) => onChange((e.target as HTMLSelectElement).value)} data-testid="dataset-select">
        {!list.some((d) => d.name === value) && <option value={value}>{value || '—'}</option>}
        {list.map((d) => (
          <option key={d.name} value={d.name}>
            {d.name} ({d.kind})
          </option>
        ))}
      </select>
    </span>
  );
}
