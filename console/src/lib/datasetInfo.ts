import { ApiError } from './api.ts';
import { ident } from './sql.ts';
import { parseTimestamp } from './time.ts';
import type { Session } from './store.ts';

export interface DatasetDetails {
  count?: number;
  rawBytes?: number;
  storedBytes?: number;
  files?: number;
  firstMs?: number;
  lastMs?: number;
  retention?: string;
}

/** Whether `GET /logstream/{name}/info` exists on this server (learnt from the first answer). */
let infoEndpoint: boolean | undefined;

const pick = (o: Record<string, unknown>, keys: string[]) => keys.map((k) => o[k]).find((v) => v !== undefined && v !== null);

/** The first and last event time of a dataset (the server's info, else the data itself). */
export async function firstAndLast(s: Session, name: string): Promise<{ firstMs?: number; lastMs?: number }> {
  if (infoEndpoint !== false) {
    try {
      const info = await s.api.json<Record<string, unknown>>(`/api/v1/logstream/${encodeURIComponent(name)}/info`);
      infoEndpoint = true;
      const firstMs = parseTimestamp(pick(info, ['first-event-at', 'first_event_at', 'firstEventAt']));
      const lastMs = parseTimestamp(pick(info, ['latest-event-at', 'latest_event_at', 'last-event-at', 'last_event_at', 'lastEventAt', 'latestEventAt']));
      // The server's times cover stored files; events still in its write-ahead log are asked of the data.
      if (firstMs !== undefined && lastMs !== undefined) return { firstMs, lastMs };
    } catch (e) {
      // 404 from a server without the endpoint (a missing dataset fails the query below too).
      if (!(e instanceof ApiError && e.status === 404)) throw e;
      infoEndpoint = false;
    }
  }
  // No info endpoint, or nothing stored yet: ask the data itself.
  const schema = await s.schema(name);
  if (!schema.timeColumn) return {};
  const t = ident(schema.timeColumn);
  const { records } = await s.api.query({
    query: `SELECT min(${t}) AS first, max(${t}) AS last FROM ${ident(name)}`,
    startTime: '1970-01-01T00:00:00Z',
    endTime: new Date(Date.now() + 86_400_000).toISOString(),
  });
  return { firstMs: parseTimestamp(records[0]?.first), lastMs: parseTimestamp(records[0]?.last) };
}

export async function datasetDetails(s: Session, name: string): Promise<DatasetDetails> {
  const enc = encodeURIComponent(name);
  const [stats, retention, times] = await Promise.all([
    s.api.json<Record<string, Record<string, number>>>(`/api/v1/logstream/${enc}/stats`).catch(() => undefined),
    s.api.json<{ duration?: string }[]>(`/api/v1/logstream/${enc}/retention`).catch(() => undefined),
    firstAndLast(s, name).catch(() => ({}) as { firstMs?: number; lastMs?: number }),
  ]);
  return {
    count: stats?.ingestion?.count,
    rawBytes: stats?.ingestion?.size,
    storedBytes: stats?.storage?.size,
    files: stats?.storage?.files,
    retention: Array.isArray(retention) ? retention[0]?.duration ?? 'forever' : undefined,
    ...times,
  };
}
