import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import type { Hono } from 'hono';
import { counts, CountsRequest } from '../../query/sql/counts.ts';
import { canAccess, isListed } from '../shared/auth.ts';
import type { AppEnv, Services } from '../shared/context.ts';
import { jsonBody, knownDataset, requires } from './middleware.ts';
import { arrowSchema, queriedStats, streamInfo, TELEMETRY_TYPE } from './parseableShapes.ts';

/**
 * Endpoints Parseable's clients call beyond the core API: `about` (pb version/status), Prism's home
 * and dataset info (pb's dataset list, the console), stream info (pb's dataset type) and counts (the
 * console's histogram). Shapes follow Parseable's source; see docs/compatibility.md.
 */

const VERSION = (JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

export function registerCompatRoutes(app: Hono<AppEnv>, services: Services): void {
  const { storage, config, queries } = services;
  const known = knownDataset(storage);
  const store =
    config.storage === 's3'
      ? { type: 'S3 bucket', path: `${config.s3.url ?? ''}/${config.s3.bucket}` }
      : { type: 'Local drive', path: path.join(config.dataDir, 'store') };
  // The same for every worker on one bucket, and stable across restarts.
  const deploymentId = createHash('sha256').update(`${store.type}:${store.path}`).digest('hex').slice(0, 26).toUpperCase();

  // Any authenticated key, as in Parseable: `pb status` with a writer key reads it too.
  app.get('/api/v1/about', (c) => {
    // Where data lives (the data directory, the bucket's address) is for admin keys only.
    const admin = c.get('principal').role === 'admin';
    return c.json({
      version: `v${VERSION}`,
      uiVersion: null,
      commit: null,
      deploymentId,
      updateAvailable: false,
      latestVersion: null,
      llmActive: false,
      llmProvider: null,
      oidcActive: services.signIn !== undefined,
      license: null,
      // Every worker ingests and queries: Parseable's "Standalone" (not its ingest/query split).
      mode: 'Standalone',
      staging: admin ? path.join(config.dataDir, 'wal') : null,
      hotTier: 'Disabled',
      // No Arrow Flight server: `pb tail` (live tail over gRPC) is not available.
      grpcPort: null,
      store: admin ? store : { type: store.type, path: null },
      analytics: { clarityTag: null },
      queryEngine: 'DuckDB',
    });
  });

  app.get('/api/prism/v1/home', requires('read'), (c) => {
    const p = c.get('principal');
    const datasets = storage
      .list()
      .filter((m) => isListed(p, m.name))
      .map((m) => {
        const s = storage.stats(m.name);
        return {
          title: m.name,
          datasetType: TELEMETRY_TYPE[m.kind],
          ...(m.timeColumn !== 'p_timestamp' ? { timePartition: m.timeColumn } : {}),
          datasetFormat: m.kind,
          ingestion: s.current.rows > 0,
          // Ours: Parseable's per-day `Stats` names, over the dataset's whole life so far.
          stats: { events: s.current.rows, ingestion: s.current.rawBytes, storage: s.current.storageBytes },
        };
      });
    return c.json({
      datasets,
      checklist: { dataIngested: datasets.some((d) => d.ingestion), keystoneCreated: false, alertCreated: false, userAdded: false },
      triggeredAlertsCount: 0,
    });
  });

  app.get('/api/prism/v1/logstream/:name/info', requires('read', 'name'), known, (c) => {
    const name = c.req.param('name');
    const stats = storage.stats(name);
    const { schema } = storage.schemaOf(name);
    return c.json({ info: streamInfo(stats), schema: arrowSchema(stats.meta, schema), stats: queriedStats(stats), retention: stats.meta.retention ?? [] });
  });

  app.get('/api/v1/logstream/:name/info', requires('read', 'name'), known, (c) => {
    const name = c.req.param('name');
    return c.json(streamInfo(storage.stats(name)));
  });

  app.post('/api/v1/counts', requires('read'), jsonBody(CountsRequest, config.server.maxBodyBytes), async (c) => {
    const p = c.get('principal');
    return c.json(await counts({ queries, storage, canRead: (n) => canAccess(p, n), principalId: p.id }, c.get('body')));
  });
}
