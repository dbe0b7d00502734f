import { createMiddleware } from 'hono/factory';
import type { StorageEngine } from '../../storage/engine.ts';
import type { z } from 'zod';
import { invalidInput } from '../../errors.ts';
import { authorize, type Action } from '../shared/auth.ts';
import { parseJson, readBody } from './body.ts';
import type { AppEnv } from '../shared/context.ts';

/**
 * Route-level middleware, as Hono's own middleware works: a route declares what it needs (the action
 * its key must be allowed, its body's schema and size limit) and the handler gets it checked.
 */

/** One wording for every zod failure a client can cause: `path: message; …`. */
export function formatIssues(error: z.ZodError): string {
  return error.issues.map((i) => `${i.path.join('.') || 'body'}: ${i.message}`).join('; ');
}

/** The key must be allowed `action` (on the dataset named by the path parameter `datasetParam`, if given). */
export const requires = (action: Action, datasetParam?: string) =>
  createMiddleware<AppEnv>(async (c, next) => {
    authorize(c.get('principal'), action, datasetParam ? c.req.param(datasetParam) : undefined);
    await next();
  });

/**
 * Reads a JSON body (413 over `maxBytes`, 400 if malformed) and validates it with `schema` (400 naming
 * every problem); the handler reads it as `c.get('body')`.
 */
export const jsonBody = <S extends z.ZodType>(schema: S, maxBytes: number) =>
  createMiddleware<{ Variables: { body: z.infer<S> } }>(async (c, next) => {
    const parsed = schema.safeParse(parseJson(await readBody(c, maxBytes)));
    if (!parsed.success) throw invalidInput(formatIssues(parsed.error));
    c.set('body', parsed.data);
    await next();
  });

/**
 * The dataset named by the path parameter must exist. One created by another worker since the last
 * catalog refresh is looked up in the store first, so it is never a 404 on this worker.
 */
export const knownDataset = (storage: StorageEngine, param = 'name') =>
  createMiddleware<AppEnv>(async (c, next) => {
    await storage.require(c.req.param(param) ?? '');
    await next();
  });
