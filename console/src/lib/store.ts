import { createContext } from 'preact';
import { useContext } from 'preact/hooks';
import { Api } from './api.ts';
import { normalizeSchema, type DatasetSchema } from './schema.ts';

export interface DatasetEntry {
  name: string;
  kind: string;
  created_at?: string;
}

/** What the signed-in key may do, from `GET /api/v1/whoami` (read-only: nothing is probed by writing). */
export interface Capabilities {
  read: boolean;
  create: boolean;
  /** Saved queries: shown only while `GET /api/v1/filters` exists (not 404). */
  filters: boolean;
}

export interface WhoAmI {
  /** A signed-in user's name and roles (single sign-on); null for an API key. */
  user: string | null;
  roles: string[] | null;
  role: string;
  actions: string[];
  /** The datasets the key is limited to; null: every dataset. */
  datasets: string[] | null;
}

export class Session {
  private schemas = new Map<string, Promise<DatasetSchema>>();

  constructor(
    readonly api: Api,
    readonly who: WhoAmI,
    public caps: Capabilities,
    public datasets: DatasetEntry[],
  ) {}

  /** Signs in with an API key, or (no key) with the session cookie single sign-on set. */
  static async signIn(key?: string): Promise<Session> {
    const api = new Api(key);
    // 401 (a wrong key) is the caller's to show.
    const who = await api.json<WhoAmI>('/api/v1/whoami');
    const read = who.actions.includes('read');
    const [datasets, filters] = await Promise.all([
      read ? api.json<DatasetEntry[]>('/api/v1/logstream') : Promise.resolve([] as DatasetEntry[]),
      read ? api.json('/api/v1/filters').then(() => true, () => false) : Promise.resolve(false),
    ]);
    return new Session(api, { ...who, user: who.user ?? null, roles: who.roles ?? null }, { read, create: who.actions.includes('create'), filters }, datasets.map((d) => ({ ...d, kind: d.kind ?? 'json' })));
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

  /** May this key change retention of and delete `name`? (Both are the admin right, on that dataset.) */
  canAdmin(name: string): boolean {
    return this.who.actions.includes('admin') && (this.who.datasets === null || this.who.datasets.includes(name));
  }
}

export const SessionContext = createContext<Session | null>(null);

export function useSession(): Session {
  const s = useContext(SessionContext);
  if (!s) throw new Error('no session');
  return s;
}
