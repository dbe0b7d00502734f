import type { Hono } from 'hono';
import { stream } from 'hono/streaming';
import { z } from 'zod';
import { prepareQuery, runQuery, streamQuery } from '../query/executor.ts';
import { parseTimeBound } from '../query/time.ts';
import { authorize, canAccess } from './auth.ts';
import { parseJson, readBody } from './body.ts';
import type { AppEnv, Services } from './context.ts';
import { invalidInput } from '../errors.ts';

const flag = z.union([z.boolean(), z.enum(['true', 'false']).transform((v) => v === 'true')]);

const QueryBody = z.object({
  query: z.string().min(1, 'query must not be empty'),
  startTime: z.string().min(1),
  endTime: z.string().min(1),
  fields: flag.optional(),
  send_null: flag.optional(),
  sendNull: flag.optional(),
  streaming: flag.optional(),
});

export function registerQueryRoutes(app: Hono<AppEnv>, { registry, duck, config }: Services): void {
  app.post('/api/v1/query', async (c) => {
    const principal = c.get('principal');
    authorize(principal, 'read');
    const parsed = QueryBody.safeParse(parseJson(await readBody(c, config.maxBodyBytes)));
    if (!parsed.success) {
      throw invalidInput(parsed.error.issues.map((i) => `${i.path.join('.') || 'body'}: ${i.message}`).join('; '));
    }
    const body = parsed.data;
    const startMs = parseTimeBound(body.startTime, 'startTime');
    const endMs = parseTimeBound(body.endTime, 'endTime');
    if (startMs > endMs) throw invalidInput('startTime must not be after endTime');
    const fromQuery = (k: string) => {
      const v = c.req.query(k);
      return v === undefined ? undefined : v === 'true';
    };
    const withFields = body.fields ?? fromQuery('fields') ?? false;
    const sendNull = body.send_null ?? body.sendNull ?? fromQuery('send_null') ?? false;
    const streaming = body.streaming ?? fromQuery('streaming') ?? false;

    const prepared = await prepareQuery(duck, registry, {
      sql: body.query,
      startMs,
      endMs,
      sendNull,
      canRead: (name) => canAccess(principal, name),
      timeoutMs: config.queryTimeoutMs,
    });
    if (!streaming) {
      const { fields, records } = await runQuery(prepared);
      return c.json(withFields ? { fields, records } : records);
    }
    const { fields, rows } = await streamQuery(prepared);
    c.header('Content-Type', 'application/x-ndjson');
    return stream(c, async (out) => {
      if (withFields) await out.write(`${JSON.stringify({ fields })}\n`);
      try {
        for await (const batch of rows) {
          await out.write(batch.map((r) => JSON.stringify(r)).join('\n') + (batch.length ? '\n' : ''));
        }
      } catch (err) {
        // Headers are gone already: report the failure in-band as the last line.
        await out.write(`${JSON.stringify({ error: (err as Error).message })}\n`);
      }
    });
  });
}
