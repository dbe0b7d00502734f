import { buildPromql } from '../../scripts/build-promql.ts';
import { buildService } from '../../scripts/build-service.ts';

/** The suite runs the service as users do, from dist/: built once per run, so it is never stale. */
export async function setup(): Promise<void> {
  await buildService();
  buildPromql();
}
