import { createContext } from 'preact';
import { useContext } from 'preact/hooks';
import { Api, ApiError } from './api.ts';
import { normalizeSchema, type DatasetSchema } from './schema.ts';

export interface DatasetEntry {
  name: string;
  kind: string;
  created_at?: string;
}

/**
 * What the signed-in key may do. The API has no "who am I" endpoint yet, so this is learnt by asking
 * it: listing answers 403 to a key that may not read; creating a dataset with a name the API always
 * refuses answers 403 (no right to create) or 400 (the right, and nothing created); changing a
 * dataset's retention with an invalid body answers 403 or 400 the same way (admin on that dataset).
 * A 403 on a real action also hides it from then on.
 */
export interface Capabilities {
  read: boolean;
  create: boolean;
  /** Saved queries: shown only while `GET /api/v1/filters` exists (not 404). */
  filters: boolean;
}

export class Session {
  private schemas = new Map<string, Promise<DatasetSchema>>();
  private admin = new Map<string, Promise<boolean>>();

  constructor(
    readonly api: Api,
    public caps: Capabilities,
    public datasets: DatasetEntry[],
  ) {}

  static async signIn(key: string): Promise<Session> {
    const api = new Api(key);
    let datasets: DatasetEntry[] = [];
    let read = true;
    try {
      datasets = await api.json<DatasetEntry[]>('/api/v1/logstream');
    } catch (e) {
      // 401 (a wrong key) is the caller's to show; 403 is a key that may only write.
      if (!(e instanceof ApiError) || e.status !== 403) throw e;
      read = false;
    }
    const [create, filters] = await Promise.all([
      probe(() => api.send('PUT', '/api/v1/logstream/p_console_probe')),
      read ? api.json('/api/v1/filters').then(() => true, () => false) : Promise.resolve(false),
    ]);
    return new Session(api, { read, create, filters }, datasets.map((d) => ({ ...d, kind: d.kind ?? 'json' })));
  }

  async refreshDatasets(): Promise<DatasetEntry[]> {
    if (!this.caps.read) return [];
    const list = await this.api.json<DatasetEntry[]>('/api/v1/logstream');
    this.datasets = list.map((d) => ({ ...d, kind: d.kind ?? 'json' }));
    this.schemas.clear();
    return this.datasets;
  }

  kindOf(name: string): string | undefined {
    return this.datasets.find((d) => d.name === name)?.kind;
  }

  schema(name: string, fresh = false): Promise<DatasetSchema> {
    if (fresh) this.schemas.delete(name);
    let s = this.schemas.get(name);
    if (!s) {
      s = this.api.json(`/api/v1/logstream/${encodeURIComponent(name)}/schema`).then((b) => normalizeSchema(b, this.kindOf(name)));
      s.catch(() => this.schemas.delete(name));
      this.schemas.set(name, s);
    }
    return s;
  }

  /** May this key change retention of and delete `name`? (Both are the admin right.) */
  canAdmin(name: string): Promise<boolean> {
    let p = this.admin.get(name);
    if (!p) {
      p = probe(() => this.api.send('PUT', `/api/v1/logstream/${encodeURIComponent(name)}/retention`, {}));
      this.admin.set(name, p);
    }
    return p;
  }

  denied(name: string): void {
    this.admin.set(name, Promise.resolve(false));
  }
}

/** True unless the call answers 401/403: a refused probe body (400) still proves the right. */
async function probe(call: () => Promise<unknown>): Promise<boolean> {
  try {
    await call();
    return true;
  } catch (e) {
    return !(e instanceof ApiError && (e.status === 401 || e.status === 403));
  }
}

export const SessionContext = createContext<Session | null>(null);

export function useSession(): Session {
  const s = useContext(SessionContext);
  if (!s) throw new Error('no session');
  return s;
}
