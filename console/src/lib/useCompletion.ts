import { useEffect, useState } from 'preact/hooks';
import type { CompletionSchema } from '../components/SqlEditor.tsx';
import { useSession } from './store.ts';

/** Datasets and their columns for the editor's completion, filled in as schemas arrive (first 50 datasets). */
export function useCompletionSchema(): CompletionSchema {
  const s = useSession();
  const [schema, setSchema] = useState<CompletionSchema>(() => Object.fromEntries(s.datasets.map((d) => [d.name, []])));
  useEffect(() => {
    let live = true;
    for (const d of s.datasets.slice(0, 50)) {
      s.schema(d.name).then(
        (sc) => live && setSchema((prev) => ({ ...prev, [d.name]: sc.fields.map((f) => f.name) })),
        () => undefined,
      );
    }
    return () => {
      live = false;
    };
  }, [s.datasets]);
  return schema;
}
