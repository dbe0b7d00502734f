import { randomUUID } from 'node:crypto';
import type { Context, Hono } from 'hono';
import { conflict, isDomainError, notFound, invalidInput, tooLarge } from '../../errors.ts';
import { log } from '../../log.ts';
import { CURRENT_FILTER_VERSION, Filter, FilterStore, type SavedFilter } from '../../storage/filters.ts';
import { authorize, canAccess, type Principal } from '../shared/auth.ts';
import { parseJson, readBody } from './body.ts';
import type { AppEnv, Services } from '../shared/context.ts';
import { formatIssues, requires } from './middleware.ts';

/**
 * A JSON array written one item at a time, so a listing never holds every body at once. The first item is
 * read before the answer starts, so an unreachable store is still a proper error status; a failure later
 * aborts the response (the client sees a broken body, never a shortened list).
 */
async function jsonArrayStream<T>(next: () => Promise<T | undefined>, cancel: () => Promise<unknown>): Promise<ReadableStream<Uint8Array>> {
  let pending = await next();
  let first = true;
  const encoder = new TextEncoder();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (pending === undefined) {
        controller.enqueue(encoder.encode(first ? '[]' : ']'));
        controller.close();
        return;
      }
      controller.enqueue(encoder.encode(`${first ? '[' : ','}${JSON.stringify(pending)}`));
      first = false;
      pending = await next();
    },
    async cancel() {
      await cancel();
    },
  });
}

/**
 * Saved queries, Parseable's `/api/v1/filters` (what `pb query save` / `pb query list` and the
 * console use). Any key that may read may save; a key sees the filters of datasets it may read, and
 * changes or deletes its own (an admin key: any). Each filter is at most P_FILTER_MAX_BYTES and a key
 * owns at most P_FILTERS_PER_KEY (docs/security.md).
 */
export function registerFilterRoutes(app: Hono<AppEnv>, { storage, config }: Services): void {
  const filters = new FilterStore(storage.store, { maxBytes: config.filters.maxBytes });
  // Objects saved before the size limit (or by hand) are moved out of the listing's way; listings skip
  // them by size meanwhile, so the service need not wait for this.
  filters.setAsideOversized().catch((err: unknown) => log.warn('filters: setting aside oversized objects failed', { error: err as Error }));
  // Creations by one key run one after another, so two concurrent saves cannot both pass the count.
  const creating = new Map<string, Promise<unknown>>();
  const tooBig = () => tooLarge(`a saved filter is at most ${config.filters.maxBytes} bytes (P_FILTER_MAX_BYTES)`);

  const owner = (p: Principal) => p.id ?? 'anonymous';
  const visible = (p: Principal, f: SavedFilter) => canAccess(p, f.stream_name);
  const mayChange = (p: Principal, f: SavedFilter) => visible(p, f) && (p.role === 'admin' || f.user_id === owner(p));

  async function readFilter(c: Context<AppEnv>, p: Principal): Promise<Filter> {
    const parsed = Filter.safeParse(parseJson(await readBody(c, config.filters.maxBytes).catch((err: unknown) => {
      throw isDomainError(err) && err.kind === 'too_large' ? tooBig() : err;
    })));
    if (!parsed.success) throw invalidInput(formatIssues(parsed.error));
    if (!parsed.data.stream_name) throw invalidInput('stream_name must not be empty');
    // Permission before existence, as queries answer: a key that may not read the name gets 403
    // whether a dataset of that name exists or not.
    authorize(p, 'read', parsed.data.stream_name);
    await storage.require(parsed.data.stream_name);
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
    const it = filters.list();
    const nextVisible = async () => {
      for (let r = await it.next(); !r.done; r = await it.next()) if (visible(p, r.value)) return r.value;
      return undefined;
    };
    const body = await jsonArrayStream(nextVisible, () => it.return(undefined));
    return c.body(body, 200, { 'Content-Type': 'application/json' });
  });

  app.get('/api/v1/filters/:id', requires('read'), async (c) => {
    const p = c.get('principal');
    return c.json(await ownFilter(p, c.req.param('id')));
  });

  app.post('/api/v1/filters', requires('read'), async (c) => {
    const p = c.get('principal');
    const body = await readFilter(c, p);
    const me = owner(p);
    const run = (creating.get(me) ?? Promise.resolve()).catch(() => undefined).then(async () => {
      const have = await filters.countOwnedBy(me);
      if (have >= config.filters.perKey) {
        throw conflict(`this key has ${have} saved filters, the limit (P_FILTERS_PER_KEY=${config.filters.perKey}); delete some first`);
      }
      const saved: SavedFilter = { ...body, filter_id: randomUUID(), user_id: me, version: CURRENT_FILTER_VERSION };
      if (!(await filters.put(saved))) throw tooBig();
      return saved;
    });
    creating.set(me, run);
    try {
      return c.json(await run);
    } finally {
      if (creating.get(me) === run) creating.delete(me);
    }
  });

  app.put('/api/v1/filters/:id', requires('read'), async (c) => {
    const p = c.get('principal');
    const existing = await ownFilter(p, c.req.param('id'));
    const body = await readFilter(c, p);
    // The owner stays the key that created it, also when an admin key edits it.
    const saved: SavedFilter = { ...body, filter_id: existing.filter_id, user_id: existing.user_id, version: CURRENT_FILTER_VERSION };
    if (!(await filters.put(saved))) throw tooBig();
    return c.json(saved);
  });

  app.delete('/api/v1/filters/:id', requires('read'), async (c) => {
    const p = c.get('principal');
    const existing = await ownFilter(p, c.req.param('id'));
    await filters.delete(existing.filter_id);
    return c.json({ message: `filter ${existing.filter_id} deleted` });
  });
}
