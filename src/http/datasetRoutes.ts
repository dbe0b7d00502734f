import type { Hono } from 'hono';
import { z } from 'zod';
import { parseDurationMs } from '../config.ts';
import { parseJson, readBody } from './body.ts';
import { authorize, canAccess } from './auth.ts';
import type { AppEnv, Services } from './context.ts';
import type { DatasetKind } from '../storage/datasets.ts';
import { invalidInput } from '../errors.ts';

/** Time column of each kind of dataset: JSON events by receive time, OTel records by their own time. */
export const TIME_COLUMN: Record<DatasetKind, string> = {
  json: 'p_timestamp',
  'otel-logs': 'time_unix_nano',
  'otel-traces': 'span_start_time_unix_nano',
  'otel-metrics': 'time_unix_nano',
};

export function datasetKindFromHeader(value: string | undefined): DatasetKind {
  if (!value || value === 'json') return 'json';
  if (value === 'otel-logs' || value === 'otel-traces' || value === 'otel-metrics') return value;
  throw invalidInput(`X-P-Log-Source "${value}" is not one of json, otel-logs, otel-traces, otel-metrics`);
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

export function registerDatasetRoutes(app: Hono<AppEnv>, { registry, config }: Services): void {
  app.get('/api/v1/logstream', (c) => {
    const p = c.get('principal');
    authorize(p, 'read');
    return c.json(registry.list().filter((m) => canAccess(p, m.name)).map((m) => ({ name: m.name, kind: m.kind, created_at: m.createdAt })));
  });

  app.put('/api/v1/logstream/:name', async (c) => {
    const name = c.req.param('name');
    authorize(c.get('principal'), 'create', name);
    const kind = datasetKindFromHeader(c.req.header('x-p-log-source'));
    const { meta, created } = await registry.create(name, kind, TIME_COLUMN[kind]);
    return c.json(
      { message: created ? `dataset ${name} created` : `dataset ${name} already exists`, name: meta.name, kind: meta.kind, created_at: meta.createdAt },
      created ? 201 : 200,
    );
  });

  app.delete('/api/v1/logstream/:name', async (c) => {
    const name = c.req.param('name');
    authorize(c.get('principal'), 'delete', name);
    await registry.delete(name);
    return c.json({ message: `dataset ${name} deleted` });
  });

  app.get('/api/v1/logstream/:name/schema', async (c) => {
    const name = c.req.param('name');
    authorize(c.get('principal'), 'read', name);
    await registry.require(name);
    const { meta, schema } = registry.schemaOf(name);
    return c.json({
      name: meta.name,
      kind: meta.kind,
      time_column: meta.timeColumn,
      fields: Object.entries(schema).map(([field, type]) => ({ name: field, data_type: type })),
    });
  });

  // Parseable's shape: [{"description": "…", "action": "delete", "duration": "30d"}]; [] clears it.
  app.put('/api/v1/logstream/:name/retention', async (c) => {
    const name = c.req.param('name');
    authorize(c.get('principal'), 'admin', name);
    const parsed = RetentionBody.safeParse(parseJson(await readBody(c, config.maxBodyBytes)));
    if (!parsed.success) throw invalidInput(parsed.error.issues.map((i) => `${i.path.join('.') || 'body'}: ${i.message}`).join('; '));
    const meta = await registry.setRetention(name, parsed.data);
    return c.json({ message: `retention of ${name} set`, retention: meta.retention });
  });

  app.get('/api/v1/logstream/:name/retention', async (c) => {
    const name = c.req.param('name');
    authorize(c.get('principal'), 'read', name);
    await registry.require(name);
    return c.json(registry.schemaOf(name).meta.retention ?? []);
  });

  app.get('/api/v1/logstream/:name/stats', async (c) => {
    const name = c.req.param('name');
    authorize(c.get('principal'), 'read', name);
    await registry.require(name);
    return c.json(registry.stats(name));
  });
}
