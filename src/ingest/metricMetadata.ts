import { DomainError, unavailable } from '../errors.ts';
import { log } from '../log.ts';
import type { StorageEngine } from '../storage/engine.ts';
import type { IngestInfo } from './worker/pipeline.ts';

/**
 * Remembers the remote write 1.0 metadata a request carried (src/storage/metricMetadata.ts), after its
 * samples were stored. Prometheus sends metadata in requests of its own, with no samples: such a
 * request is acknowledged only once its metadata is in the store (an error here makes it retry). When
 * the request also carried samples, those are stored and acknowledged already: answering an error now
 * would have the sender store them twice, and it sends its metadata again anyway (every
 * metadata_config.send_interval), so a failure is only logged.
 */
export async function rememberRequestMetadata(storage: StorageEngine, name: string, count: number, info: IngestInfo): Promise<void> {
  if (!info.metadata?.length) return;
  try {
    const { dropped } = await storage.rememberMetricMetadata(name, info.metadata);
    if (dropped) log.warn('metric metadata past the bounds was not remembered', { dataset: name, families: dropped });
  } catch (err) {
    if (count > 0) {
      log.warn('metric metadata could not be stored; the sender sends it again', { dataset: name, error: (err as Error).message });
      return;
    }
    if (err instanceof DomainError) throw err;
    throw unavailable(`metric metadata could not be stored (${(err as Error).message}); retry`, 5);
  }
}
