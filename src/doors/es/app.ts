/**
 * The Elasticsearch-compatible door, mounted at `/es` under the HTTP listener (so the HTTP door's key
 * check, connection cap and body limits apply): the bulk API into datasets, and the few calls shippers
 * make at start answered so that they go on (docs/elasticsearch.md lists each one).
 */
import { randomUUID } from 'node:crypto';
import { Hono, type Context } from 'hono';
import { DomainError } from '../../errors.ts';
import { log } from '../../log.ts';
import { datasetOfIndex, decodeBulk, ES_TIME_FIELD, type BulkItem } from '../../ingest/esbulk/decode.ts';
import type { EventGroup, GroupResult } from '../../ingest/groups.ts';
import { ingestRights } from '../shared/auth.ts';
import type { AppEnv, Services } from '../shared/context.ts';
import { requestBody } from '../shared/requestBody.ts';
import { esError, esErrorBody, esStatus } from './errors.ts';

/** The Elasticsearch version this door answers as: 8.x, which the official 8.x and 9.x clients accept. */
export const ES_VERSION = '8.17.0';
const CLUSTER = 'telemetry-lakehouse';

function info() {
  return {
    name: CLUSTER,
    cluster_name: CLUSTER,
    cluster_uuid: 'lakehouse',
    version: {
      number: ES_VERSION,
      build_flavor: 'default',
      build_type: 'tar',
      build_hash: 'lakehouse',
      build_date: '2026-01-01T00:00:00.000Z',
      build_snapshot: false,
      lucene_version: '9.12.0',
      minimum_wire_compatibility_version: '7.17.0',
      minimum_index_compatibility_version: '7.0.0',
    },
    tagline: 'You Know, for Search',
  };
}

let seqNo = 0;
/** Ids of documents sent without one: unique per process start (a random prefix), cheap per item. */
const idPrefix = randomUUID().slice(0, 8);
let idCount = 0;
const nextId = () => `${idPrefix}${(idCount++).toString(36).padStart(8, '0')}`;

/** One bulk item's entry of the response, from what the decoder and storage said of it. */
function itemEntry(item: BulkItem, stored: GroupResult | undefined) {
  const base = { _index: item.index, _id: item.id ?? nextId() };
  if (!item.outcome.ok) return { [item.action]: { ...base, status: item.outcome.status, error: { type: item.outcome.type, reason: item.outcome.reason, index: item.index } } };
  if (stored && 'error' in stored) return { [item.action]: { ...base, status: esStatus(stored.error), error: { ...esError(stored.error), index: item.index } } };
  const ok = { _version: 1, result: 'created', _shards: { total: 1, successful: 1, failed: 0 }, _seq_no: seqNo++, _primary_term: 1, status: 201 };
  return { [item.action]: { ...base, ...ok } };
}

/**
 * Decodes a bulk body into item results and groups per dataset; documents only looked at (the fast
 * path), each group with its exact decoding as the fallback that updates its items' outcomes.
 */
function bulkGroups(body: Buffer, index: string | undefined, items: BulkItem[]): EventGroup[] {
  const received = new Date().toISOString();
  const collect = (exact: boolean, only: string | undefined) => {
    const groups = new Map<string, EventGroup>();
    let n = 0;
    decodeBulk(
      body,
      index,
      received,
      {
        item: (item) => {
          if (!exact) items.push(item);
          else if (item.dataset === only) items[n].outcome = item.outcome;
          n++;
        },
        document: (dataset, json) => {
          if (only !== undefined && dataset !== only) return;
          let g = groups.get(dataset);
          if (!g) groups.set(dataset, (g = { dataset, events: [], time: ES_TIME_FIELD }));
          g.events.push(json);
        },
      },
      exact,
    );
    return groups;
  };
  const fast = [...collect(false, undefined).values()];
  for (const g of fast) g.exact = () => collect(true, g.dataset).get(g.dataset) ?? { dataset: g.dataset, events: [], time: ES_TIME_FIELD };
  return fast;
}

async function bulk(c: Context<AppEnv>, services: Services) {
  const started = Date.now();
  const items: BulkItem[] = [];
  const results = await services.ingest.ingestGroups({
    headers: c.req.raw.headers,
    ...requestBody(c),
    rights: ingestRights(c.get('principal')),
    decode: (body) => bulkGroups(body, c.req.param('index'), items),
  });
  const byDataset = new Map(results.map((r) => [r.dataset, r]));
  const entries = items.map((item) => itemEntry(item, byDataset.get(item.dataset)));
  const errors = entries.some((e) => Object.values(e)[0].status >= 300);
  return c.json({ took: Date.now() - started, errors, items: entries });
}

const acknowledged = (c: Context) => c.json({ acknowledged: true });
const missing = (c: Context, type: string, reason: string) => c.json(esErrorBody(404, type, reason), 404);

/** The calls shippers make before they send (version, license, templates, pipelines, indices, nodes). */
function registerStartupCalls(app: Hono<AppEnv>, services: Services): void {
  app.get('/', (c) => c.json(info()));
  app.get('/_license', (c) => c.json({ license: { status: 'active', uid: 'lakehouse', type: 'basic', issue_date: '2026-01-01T00:00:00.000Z', issue_date_in_millis: 1767225600000, max_nodes: 1000, issued_to: CLUSTER, issuer: 'elasticsearch', start_date_in_millis: -1 } }));
  app.get('/_xpack', (c) => c.json({ build: { hash: 'lakehouse', date: '2026-01-01T00:00:00.000Z' }, license: { uid: 'lakehouse', type: 'basic', mode: 'basic', status: 'active' }, features: {} }));
  app.get('/_nodes', (c) => c.json(nodes()));
  app.get('/_nodes/*', (c) => c.json(nodes()));
  app.get('/_cluster/health', (c) => c.json({ cluster_name: CLUSTER, status: 'green', timed_out: false, number_of_nodes: 1, number_of_data_nodes: 1 }));
  // Templates and pipelines are accepted and not kept: a dataset's schema follows its events.
  for (const kind of ['_index_template', '_template', '_component_template', '_ingest/pipeline']) {
    app.get(`/${kind}/:name`, (c) => missing(c, 'resource_not_found_exception', `${kind} [${c.req.param('name')}] is not kept by this service`));
    app.put(`/${kind}/:name`, acknowledged);
    app.post(`/${kind}/:name`, acknowledged);
  }
  app.put('/_data_stream/:name', acknowledged);
  // An index "exists" when its dataset does; creating one is accepted (the dataset is made on first write).
  app.put('/:index', (c) => c.json({ acknowledged: true, shards_acknowledged: true, index: c.req.param('index') }));
  app.get('/:index', async (c, next) => {
    if (c.req.param('index').startsWith('_')) return next();
    const meta = await services.storage.resolve(datasetOfIndex(c.req.param('index')));
    if (!meta) return missing(c, 'index_not_found_exception', `no such index [${c.req.param('index')}]`);
    return c.json({ [c.req.param('index')]: { aliases: {}, mappings: {}, settings: {} } });
  });
}

function nodes() {
  return { _nodes: { total: 1, successful: 1, failed: 0 }, cluster_name: CLUSTER, nodes: { lakehouse: { name: CLUSTER, version: ES_VERSION, roles: ['data', 'ingest', 'master'], http: { publish_address: '127.0.0.1:9200' } } } };
}

/** The `/es` sub-app. */
export function createEsApp(services: Services): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  // The official clients refuse a server whose answers lack this header (their product check).
  app.use('*', async (c, next) => {
    await next();
    c.header('X-Elastic-Product', 'Elasticsearch');
  });
  app.post('/_bulk', (c) => bulk(c, services));
  app.put('/_bulk', (c) => bulk(c, services));
  app.post('/:index/_bulk', (c) => bulk(c, services));
  app.put('/:index/_bulk', (c) => bulk(c, services));
  registerStartupCalls(app, services);
  app.notFound((c) => c.json(esErrorBody(404, 'unsupported_operation_exception', `${c.req.method} ${c.req.path} is not supported by this Elasticsearch-compatible endpoint`), 404));
  app.onError((err, c) => {
    if (!(err instanceof DomainError)) {
      log.error('unhandled error', { method: c.req.method, path: c.req.path, error: err });
      return c.json(esErrorBody(500, 'exception', 'internal server error'), 500);
    }
    const status = esStatus(err);
    const { type, reason } = esError(err);
    if (err.retryAfterSec !== undefined) c.header('Retry-After', String(Math.max(1, Math.ceil(err.retryAfterSec))));
    return c.json(esErrorBody(status, type, reason), status);
  });
  return app;
}
