import type { Hono } from 'hono';
import { stream } from 'hono/streaming';
import { z } from 'zod';
import { DomainError, invalidInput, tooLarge } from '../../errors.ts';
import { queryDuration } from '../../metrics.ts';
import { parseTimeBound } from '../../query/sql/time.ts';
import { canAccess } from '../shared/auth.ts';
import { jsonBody, requires } from './middleware.ts';
import type { AppEnv, Services } from '../shared/context.ts';

const flag = z.union([z.boolean(), z.enum(['true', 'false']).transform((v) => v === 'true')]);

const QueryBody = z.object({
  query: z.string().min(1, 'query must not be empty'),
  startTime: z.string().min(1),
  endTime: z.string().min(1),
  fields: flag.optional(),
  send_null: flag.optional(),
  sendNull: flag.optional(),
  streaming: flag.optional(),
  timeFormat: z.enum(['iso', 'naive']).optional(),
});

/**
 * `POST /api/v1/query`. Buffered answers are a JSON array (or `{fields, records}`), built from the
 * worker's text chunks without parsing them again; streamed answers are NDJSON in Parseable's shape:
 * one JSON array of rows per line (one line per batch DuckDB produces), preceded by `{"fields":…}`
 * when asked, and ended by `{"error":…}` if the query fails or is cut off after the first line.
 */
export function registerQueryRoutes(app: Hono<AppEnv>, { queries, config }: Services): void {
  app.post('/api/v1/query', requires('read'), jsonBody(QueryBody, config.server.maxBodyBytes), async (c) => {
    const started = performance.now();
    const principal = c.get('principal');
    const body = c.get('body');
    const startMs = parseTimeBound(body.startTime, 'startTime');
    const endMs = parseTimeBound(body.endTime, 'endTime');
    if (startMs > endMs) throw invalidInput('startTime must not be after endTime');
    const fromQuery = (...keys: string[]) => {
      for (const k of keys) {
        const v = c.req.query(k);
        if (v !== undefined) return v === 'true';
      }
      return undefined;
    };
    const withFields = body.fields ?? fromQuery('fields') ?? false;
    const sendNull = body.sendNull ?? body.send_null ?? fromQuery('sendNull', 'send_null') ?? false;
    const streaming = body.streaming ?? fromQuery('streaming') ?? false;
    const timeFormat = body.timeFormat ?? (c.req.query('timeFormat') === 'iso' ? 'iso' : 'naive');

    const outcome = (kind: string) => queryDuration.observe({ outcome: kind }, (performance.now() - started) / 1000);
    const answer = await queries.execute({
      sql: body.query,
      startMs,
      endMs,
      sendNull,
      timeFormat,
      streaming,
      principalId: principal.id,
      canRead: (name) => canAccess(principal, name),
      signal: c.req.raw.signal,
    }).catch((err: unknown) => {
      outcome(err instanceof DomainError ? err.kind : 'error');
      throw err;
    });
    const fieldsJson = JSON.stringify(answer.fields);

    if (!streaming) {
      const parts: string[] = [];
      let bytes = 0;
      try {
        for await (const chunk of answer.chunks) {
          bytes += chunk.length;
        // The worker enforces the same limit; this keeps the service's own memory bounded regardless.
          if (bytes > config.queryLimits.maxBytes) throw tooLarge(`the result is larger than ${config.queryLimits.maxBytes} bytes (P_QUERY_MAX_RESULT_BYTES): add a LIMIT or ask for streaming=true`);
          parts.push(chunk);
        }
      } catch (err) {
        outcome(err instanceof DomainError ? err.kind : 'error');
        throw err;
      }
      outcome('ok');
      const records = `[${parts.join(',')}]`;
      c.header('p-time-elapsed', ((performance.now() - started) / 1000).toFixed(3));
      c.header('Content-Type', 'application/json');
      return c.body(withFields ? `{"fields":${fieldsJson},"records":${records}}` : records);
    }
    c.header('Content-Type', 'application/x-ndjson');
    c.header('p-time-elapsed', ((performance.now() - started) / 1000).toFixed(3));
    return stream(c, async (out) => {
      try {
        if (withFields) await out.write(`{"fields":${fieldsJson}}\n`);
        for await (const chunk of answer.chunks) await out.write(`[${chunk}]\n`);
        outcome('ok');
      } catch (err) {
        outcome(err instanceof DomainError ? err.kind : 'error');
        // Headers are gone already: the failure (a time limit, an error) is the last line.
        const message = err instanceof DomainError ? err.message : 'internal error';
        await out.write(`${JSON.stringify({ error: message })}\n`);
      }
    });
  });
}
