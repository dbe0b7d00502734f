import type { Hono } from 'hono';
import { z } from 'zod';
import { parseDurationMs } from '../../config.ts';
import { isListed } from '../shared/auth.ts';
import type { AppEnv, Services } from '../shared/context.ts';
import { jsonBody, knownDataset, requires } from './middleware.ts';
import { TIME_COLUMN, type DatasetKind } from '../../model.ts';
import { invalidInput } from '../../errors.ts';
import { isServiceName } from '../../ingest/names.ts';
import type { TimeField } from '../../storage/engine.ts';
import { isColumnName } from '../../storage/dataset/schema.ts';
import { arrowSchema, datedStats, queriedStats } from './parseableShapes.ts';


export function datasetKindFromHeader(value: string | undefined): DatasetKind {
  if (!value || value === 'json') return 'json';
  if (value === 'otel-logs' || value === 'otel-traces' || value === 'otel-metrics') return value;
  throw invalidInput(`X-P-Log-Source "${value}" is not one of json, otel-logs, otel-traces, otel-metrics`);
}

/**
 * A JSON dataset's time field from Parseable's headers (docs/time.md): `X-P-Time-Partition: <field>`
 * and `X-P-Time-Partition-Limit: <days>d` (a positive whole number of days, as Parseable reads it).
 * `p_timestamp` names the default (the receive time); OTLP datasets have their records' own time.
 */
export function timeFieldFromHeaders(kind: DatasetKind, partition: string | undefined, limit: string | undefined): TimeField | undefined {
  const field = partition?.trim() ?? '';
  const limitText = limit?.trim() ?? '';
  if (field === '' || field === TIME_COLUMN.json) {
    if (limitText !== '') throw invalidInput('X-P-Time-Partition-Limit applies to a time field: send it with X-P-Time-Partition');
    return undefined;
  }
  if (kind !== 'json') throw invalidInput(`X-P-Time-Partition is for JSON datasets; ${kind} datasets are partitioned by their records' own time`);
  if (!isColumnName(field) || isServiceName(field)) throw invalidInput(`X-P-Time-Partition "${field}" cannot be a column name (empty, too long, or a column the service fills)`);
  if (limitText === '') return { field };
  const m = /^(\d{1,10})d$/.exec(limitText);
  const days = m ? Number(m[1]) : NaN;
  if (!(days >= 1 && days <= 4_294_967_295)) throw invalidInput(`X-P-Time-Partition-Limit "${limitText}" is not a number of days like "30d"`);
  return { field, limitDays: days };
}

const RetentionBody = z
  .array(
    z.object({
      description: z.string().optional(),
      action: z.literal('delete'),
      duration: z.string().refine((d) => {
        try {
          return parseDurationMs(d) > 0;
        } catch {
          return false;
        }
      }, 'duration must be like "30d", "12h" or "90m"'),
    }),
  )
  .max(1, 'one retention rule per dataset');

/** `YYYY-MM-DD` naming a real day. */
export function isCalendarDate(text: string): boolean {
  const ms = /^\d{4}-\d{2}-\d{2}$/.test(text) ? Date.parse(`${text}T00:00:00Z`) : NaN;
  // Date.parse rolls 2026-02-30 over to March; a real day prints back as itself.
  return !Number.isNaN(ms) && new Date(ms).toISOString().startsWith(text);
}

export function registerDatasetRoutes(app: Hono<AppEnv>, { storage, config, audit }: Services): void {
  const known = knownDataset(storage);
  app.get('/api/v1/logstream', requires('read'), (c) => {
    const p = c.get('principal');
    return c.json(storage.list().filter((m) => isListed(p, m.name)).map((m) => ({ name: m.name, kind: m.kind, created_at: m.createdAt })));
  });

  app.put('/api/v1/logstream/:name', requires('create', 'name'), async (c) => {
    const name = c.req.param('name');
    const kind = datasetKindFromHeader(c.req.header('x-p-log-source'));
    const time = timeFieldFromHeaders(kind, c.req.header('x-p-time-partition'), c.req.header('x-p-time-partition-limit'));
    const { meta, created } = await storage.create(name, kind, time);
    if (created) await audit.record(c.get('principal'), { action: 'create', target: 'dataset', name: meta.name, detail: { kind: meta.kind } });
    // 200 either way, as Parseable answers: its CLI and test suite take anything else as a failure.
    return c.json({ message: created ? `dataset ${name} created` : `dataset ${name} already exists`, name: meta.name, kind: meta.kind, created_at: meta.createdAt });
  });

  app.delete('/api/v1/logstream/:name', requires('delete', 'name'), async (c) => {
    const name = c.req.param('name');
    await storage.delete(name);
    await audit.record(c.get('principal'), { action: 'delete', target: 'dataset', name });
    return c.json({ message: `dataset ${name} deleted` });
  });

  app.get('/api/v1/logstream/:name/schema', requires('read', 'name'), known, (c) => {
    const name = c.req.param('name');
    const { meta, schema } = storage.schemaOf(name);
    return c.json(arrowSchema(meta, schema));
  });

  // Parseable's shape: [{"description": "…", "action": "delete", "duration": "30d"}]; [] clears it.
  app.put('/api/v1/logstream/:name/retention', requires('admin', 'name'), jsonBody(RetentionBody, config.server.maxBodyBytes), async (c) => {
    const name = c.req.param('name');
    const meta = await storage.setRetention(name, c.get('body'));
    return c.json({ message: `retention of ${name} set`, retention: meta.retention });
  });

  app.get('/api/v1/logstream/:name/retention', requires('read', 'name'), known, (c) => {
    const name = c.req.param('name');
    return c.json(storage.schemaOf(name).meta.retention ?? []);
  });

  app.get('/api/v1/logstream/:name/stats', requires('read', 'name'), known, (c) => {
    const name = c.req.param('name');
    const date = c.req.query('date');
    if (date === undefined || date === '') return c.json(queriedStats(storage.stats(name)));
    if (!isCalendarDate(date)) throw invalidInput(`date "${date}" is not a day in the form YYYY-MM-DD`);
    return c.json(datedStats(name, date, storage.statsForDate(name, date)));
  });
}
