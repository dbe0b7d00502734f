import type { Hono } from 'hono';
import { z } from 'zod';
import { sqlIdent } from '../../../duckdb.ts';
import { forbidden, invalidInput, notFound } from '../../../errors.ts';
import { collectRows } from '../../../query/sql/collect.ts';
import { fieldStatsSql, MAX_TOP_VALUES, shapeFieldStats } from '../../../query/sql/fieldStats.ts';
import { parseTimeBound } from '../../../query/sql/time.ts';
import { actionsOf, canAccess, grantDatasets } from '../../shared/auth.ts';
import type { AppEnv, Services } from '../../shared/context.ts';
import { KeySlots } from '../../shared/slots.ts';
import { jsonBody, requires } from '../middleware.ts';

/**
 * Endpoints the web console needs and any client may use: who the key is (instead of probing with
 * writes), field statistics of a query (the field list beside Explore's rows), and live tail by long
 * polling. Everything that reads data goes through the query executor: same sandbox, permissions,
 * admission limits and time limit as `POST /api/v1/query`.
 */

/** The body of a field-stats request, its query at most `maxSqlBytes` long (checked before any work on it). */
const fieldStatsBody = (maxSqlBytes: number) =>
  z.object({
    query: z
      .string()
      .min(1, 'query must not be empty')
      .refine((q) => Buffer.byteLength(q) <= maxSqlBytes, `the query is longer than ${maxSqlBytes} bytes (P_QUERY_MAX_SQL_BYTES)`),
    startTime: z.string().min(1),
  endTime: z.string().min(1),
    top: z.number().int().min(1).max(MAX_TOP_VALUES).default(5),
  });

/** Room in a field-stats body beside its query: times, `top`, JSON's quoting and escapes. */
const FIELD_STATS_BODY_EXTRA = 64 * 1024;

/** Rows one tail answer carries at most (the newest ones). */
export const TAIL_MAX_ROWS = 500;
/** Longest a tail request waits for new rows before answering with none. */
export const TAIL_MAX_WAIT_MS = 25_000;
/** How often a waiting tail request looks at the dataset's row counter (no query, an in-memory sum). */
const TAIL_CHECK_MS = 250;

const TailBody = z.object({
  dataset: z.string().min(1),
  /** An SQL condition on the dataset's rows (`level = 'error'`), checked by the sandbox like any query. */
  where: z.string().optional(),
  /** Rows at or after this time (ISO, `now`, `10m`). */
  after: z.string().min(1),
  /** The `cursor` of the previous answer: the request waits until the dataset has rows it had not then. */
  cursor: z.string().optional(),
  /** Seconds to wait for new rows (0 answers at once); at most TAIL_MAX_WAIT_MS. */
  wait: z.number().min(0).max(TAIL_MAX_WAIT_MS / 1000).default(TAIL_MAX_WAIT_MS / 1000),
});

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => (clearTimeout(t), resolve()), { once: true });
  });

export function registerConsoleApiRoutes(app: Hono<AppEnv>, { storage, queries, config, connections }: Services): void {
  // Long polls hold a connection each: bounded per key (P_TAIL_PER_KEY) and to a quarter of the
  // connection budget in all, so waits can never take the connections ingest clients need.
  const tails = new KeySlots('live-tail long polls (P_TAIL_PER_KEY)', config.server.tailPerKey, Math.max(1, Math.floor(connections.limits.maxConnections / 4)));

  // Any valid key or session: who, what it may do and where. `datasets: null` means every dataset, present
  // and future. A signed-in user is named, with their roles; a key has `user: null`.
  app.get('/api/v1/whoami', (c) => {
    const p = c.get('principal');
    const datasets = p.grants ? grantDatasets(p.grants) : p.datasets;
    return c.json({ keyId: p.id, user: p.user ?? null, roles: p.roles ?? null, role: p.role, actions: actionsOf(p), datasets: datasets ? [...datasets].sort() : null, grants: p.grants ?? null });
  });

  // Size checks first (A2): the body is read up to the statement limit plus room for the rest, never 10 MiB.
  const { maxSqlBytes } = config.queryLimits;
  const fieldStatsLimit = Math.min(config.server.maxBodyBytes, 2 * maxSqlBytes + FIELD_STATS_BODY_EXTRA);
  app.post('/api/v1/field-stats', requires('read'), jsonBody(fieldStatsBody(maxSqlBytes), fieldStatsLimit), async (c) => {
    const p = c.get('principal');
    const body = c.get('body');
    const startMs = parseTimeBound(body.startTime, 'startTime');
    const endMs = parseTimeBound(body.endTime, 'endTime');
    if (startMs > endMs) throw invalidInput('startTime must not be after endTime');
    const rows = await collectRows(queries, { sql: fieldStatsSql(body.query, body.top), startMs, endMs, principalId: p.id, canRead: (n) => canAccess(p, n), signal: c.req.raw.signal });
    return c.json(shapeFieldStats(rows, []));
  });

  app.post('/api/v1/tail', requires('read'), jsonBody(TailBody, config.server.maxBodyBytes), async (c) => {
    const p = c.get('principal');
    const body = c.get('body');
    const meta = await storage.resolve(body.dataset, true);
    // Permission before existence, as queries answer.
    if (!canAccess(p, body.dataset) && !(meta && canAccess(p, meta.name))) throw forbidden(`this API key may not read dataset "${body.dataset}"`);
    if (!meta) throw notFound(`dataset "${body.dataset}" does not exist`);
    const afterMs = parseTimeBound(body.after, 'after');
    // Every row this worker has taken in (retention moves rows from current to deleted, so the sum only grows).
    const counter = () => {
      const s = storage.stats(meta.name);
      return String(s.current.rows + s.deleted.rows);
    };
    // Waiting costs no query: only when the counter moves (or the wait ends, for rows another worker
    // flushed) does one query run, so a tail left open costs one small query per arrival, at most.
    const signal = c.req.raw.signal;
    const deadline = Date.now() + body.wait * 1000;
    if (body.cursor !== undefined && body.wait > 0 && counter() === body.cursor) {
      const give = tails.take(p.id);
      try {
        while (counter() === body.cursor && Date.now() < deadline && !signal.aborted) await sleep(TAIL_CHECK_MS, signal);
      } finally {
        give();
      }
    }
    const cursor = counter();
    // A client that left while waiting gets no query run for it.
    if (signal.aborted) return c.json({ cursor, timeColumn: meta.timeColumn, rows: [] });
    const where = body.where?.trim() ? ` WHERE (${body.where})` : '';
    const sql = `SELECT * FROM ${sqlIdent(meta.name)}${where} ORDER BY ${sqlIdent(meta.timeColumn)} DESC LIMIT ${TAIL_MAX_ROWS}`;
    // A little past now: a sender's clock a bit ahead must not hide its events.
    const rows = await collectRows(queries, { sql, startMs: afterMs, endMs: Date.now() + 60_000, principalId: p.id, canRead: (n) => canAccess(p, n), signal });
    return c.json({ cursor, timeColumn: meta.timeColumn, rows });
  });
}
