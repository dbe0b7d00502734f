/**
 * The console's only way to the service: the public HTTP API, with the key in the `X-API-Key` header
 * (never in a URL), or, signed in through single sign-on, with the session cookie the server set
 * (HttpOnly: this code never sees it). Errors carry the API's own message and status.
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export type Row = Record<string, unknown>;

export interface QueryRequest {
  query: string;
  startTime: string;
  endTime: string;
}

export interface StreamHandlers {
  onFields: (fields: string[]) => void;
  onRows: (rows: Row[]) => void;
}

async function errorOf(res: Response): Promise<ApiError> {
  const text = await res.text().catch(() => '');
  let message = text || res.statusText;
  try {
    const body = JSON.parse(text) as { error?: unknown; message?: unknown; errorType?: unknown };
    // The Prometheus query API names the kind of failure apart (`bad_data`, `execution`, `timeout`).
    if (typeof body.error === 'string') message = typeof body.errorType === 'string' ? `${body.errorType}: ${body.error}` : body.error;
    else if (typeof body.message === 'string') message = body.message;
  } catch {
    /* a plain-text error body stays as it is */
  }
  return new ApiError(res.status, message);
}

export class Api {
  /** @param key an API key; undefined: the session cookie (single sign-on) is the credential. */
  constructor(private readonly key?: string) {}

  get bySession(): boolean {
    return this.key === undefined;
  }

  private headers(extra?: HeadersInit): Headers {
    const h = new Headers(extra);
    if (this.key !== undefined) h.set('X-API-Key', this.key);
    return h;
  }

  async fetch(path: string, init: RequestInit = {}): Promise<Response> {
    // A key is sent as a header and no cookie goes with it; a session is its cookie, to this origin only.
    const credentials = this.key === undefined ? 'same-origin' : 'omit';
    const res = await fetch(path, { ...init, headers: this.headers(init.headers), cache: 'no-store', credentials });
    if (!res.ok) throw await errorOf(res);
    return res;
  }

  async json<T = unknown>(path: string, init: RequestInit = {}): Promise<T> {
    const res = await this.fetch(path, init);
    const text = await res.text();
    return (text ? JSON.parse(text) : undefined) as T;
  }

  send<T = unknown>(method: string, path: string, body?: unknown, headers?: HeadersInit): Promise<T> {
    return this.json<T>(path, {
      method,
      headers: { 'Content-Type': 'application/json', ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  }

  /** A PromQL `query_range` over a dataset (the Prometheus query API): its `data` on success. */
  async promqlRange<T>(dataset: string, params: URLSearchParams, signal?: AbortSignal): Promise<T> {
    // GET: a read, as the expressions a person types are short.
    const res = await this.json<{ status: string; data: T }>(`/prometheus/${encodeURIComponent(dataset)}/api/v1/query_range?${params}`, { signal });
    return res.data;
  }

  /** A whole result at once (small queries: histograms, lists, metric points). */
  async query(req: QueryRequest, signal?: AbortSignal): Promise<{ fields: string[]; records: Row[] }> {
    const res = await this.json<{ fields: string[]; records: Row[] } | Row[]>('/api/v1/query', {
      method: 'POST',
      signal,
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ ...req, fields: true, send_null: true }),
    });
    // Older or other servers may answer a bare array; take the field names from the rows then.
    if (Array.isArray(res)) return { fields: res.length ? Object.keys(res[0]) : [], records: res };
    return res;
  }

  /**
   * A result as it is produced (`streaming: true`, NDJSON): rows reach `onRows` in batches while the
   * server still sends. Lines may be one row each or one JSON array of rows each (Parseable's shape);
   * `{"fields": …}` names the columns; `{"error": …}` as a line is a failure after the first row.
   */
  async queryStream(req: QueryRequest, h: StreamHandlers, signal?: AbortSignal): Promise<void> {
    const res = await this.fetch('/api/v1/query', {
      method: 'POST',
      signal,
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ ...req, fields: true, send_null: true, streaming: true }),
    });
    if (!res.body) throw new ApiError(0, 'the response has no body');
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffered = '';
    let batch: Row[] = [];
    const flushBatch = () => {
      if (batch.length) h.onRows(batch);
      batch = [];
    };
    const line = (text: string) => {
      if (!text.trim()) return;
      const v = JSON.parse(text) as unknown;
      if (Array.isArray(v)) batch.push(...(v as Row[]));
      else if (v && typeof v === 'object') {
        const o = v as Row;
        const keys = Object.keys(o);
        if (keys.length === 1 && Array.isArray(o.fields)) h.onFields(o.fields as string[]);
        else if (keys.length === 1 && typeof o.error === 'string') throw new ApiError(400, o.error);
        else batch.push(o);
      }
    };
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buffered += value;
      const lines = buffered.split('\n');
      buffered = lines.pop() ?? '';
      for (const l of lines) line(l);
      // One UI update per network chunk: smooth, and not one per row.
      flushBatch();
    }
    line(buffered);
    flushBatch();
  }
}
