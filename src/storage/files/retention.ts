import { parseDurationMs } from '../../config.ts';
import { log } from '../../log.ts';
import type { Dataset } from '../dataset/dataset.ts';
import type { Manifests } from '../manifests.ts';

/**
 * Removes from the catalog every file entirely older than the dataset's `delete` retention rule, in one
 * manifest commit that also records what was deleted (stats keep lifetime totals). The files themselves
 * go later, through the garbage collector's grace period, so queries still reading them finish.
 */
export async function applyRetention(manifests: Manifests, ds: Dataset, now = Date.now()): Promise<number> {
  const rule = ds.meta.retention?.find((r) => r.action === 'delete');
  if (!rule) return 0;
  const cutoff = now - parseDurationMs(rule.duration);
  const expired = ds.catalog.all().filter((f) => f.maxMs < cutoff);
  if (!expired.length) return 0;
  await manifests.commit(ds, manifests.reserve(), {
    add: [],
    remove: expired.map((f) => f.key),
    walSegments: [],
    ingestedBytes: 0,
    deleted: expired.map((f) => ({ key: f.key, rows: f.rows, bytes: f.bytes, rawBytes: f.rawBytes ?? 0 })),
  });
  log.info('retention removed files', { dataset: ds.meta.name, files: expired.length, olderThan: new Date(cutoff).toISOString() });
  return expired.length;
}
