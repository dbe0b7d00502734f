import { randomUUID } from 'node:crypto';
import type { Context, Hono } from 'hono';
import { notFound, invalidInput } from '../errors.ts';
import { CURRENT_FILTER_VERSION, Filter, FilterStore, type SavedFilter } from '../storage/filters.ts';
import { authorize, canAccess, type Principal } from './auth.ts';
import { parseJson, readBody } from './body.ts';
import type { AppEnv, Services } from './context.ts';
import { formatIssues, requires } from './middleware.ts';

/**
 * Saved queries, Parseable's `/api/v1/filters` (what `pb query save` / `pb query list` and the
 * console use). Any key that may read may save; a key sees the filters of datasets it may read, and
 * changes or deletes its own (an admin key: any).
 */
export function registerFilterRoutes(app: Hono<AppEnv>, { storage, config }: Services): void {
  const filters = new FilterStore(storage.store);

  const owner = (p: Principal) => p.id ?? 'anonymous';
  const visible = (p: Principal, f: SavedFilter) => canAccess(p, f.stream_name);
  const mayChange = (p: Principal, f: SavedFilter) => visible(p, f) && (p.role === 'admin' || f.user_id === owner(p));

  async function readFilter(c: Context<AppEnv>, p: Principal): Promise<Filter> {
    const parsed = Filter.safeParse(parseJson(await readBody(c, config.maxBodyBytes)));
    if (!parsed.success) throw invalidInput(formatIssues(parsed.error));
    if (!parsed.data.stream_name) throw invalidInput('stream_name must not be empty');
    authorize(p, 'read', parsed.data.stream_name);
    return parsed.data;
  }

  /** The filter if this key may change it; 404 otherwise, so ids of others' filters are not confirmed. */
  async function ownFilter(p: Principal, id: string): Promise<SavedFilter> {
    const f = await filters.get(id);
    if (!f || !mayChange(p, f)) throw notFound(`filter "${id}" does not exist or belongs to another key`);
    return f;
  }

  app.get('/api/v1/filters', requires('read'), async (c) => {
    const p = c.get('principal');
    return c.json((await filters.list()).filter((f) => visible(p, f)));
  });

  app.get('/api/v1/filters/:id', requires('read'), async (c) => {
    const p = c.get('principal');
    return c.json(await ownFilter(p, c.req.param('id')));
  });

  app.post('/api/v1/filters', requires('read'), async (c) => {
    const p = c.get('principal');
    const body = await readFilter(c, p);
    const saved = await filters.put({ ...body, filter_id: randomUUID(), user_id: owner(p), version: CURRENT_FILTER_VERSION });
    return c.json(saved);
  });

  app.put('/api/v1/filters/:id', requires('read'), async (c) => {
    const p = c.get('principal');
    const existing = await ownFilter(p, c.req.param('id'));
    const body = await readFilter(c, p);
    // The owner stays the key that created it, also when an admin key edits it.
    const saved = await filters.put({ ...body, filter_id: existing.filter_id, user_id: existing.user_id, version: CURRENT_FILTER_VERSION });
    return c.json(saved);
  });

  app.delete('/api/v1/filters/:id', requires('read'), async (c) => {
    const p = c.get('principal');
    const existing = await ownFilter(p, c.req.param('id'));
    await filters.delete(existing.filter_id);
    return c.json({ message: `filter ${existing.filter_id} deleted` });
  });
}
