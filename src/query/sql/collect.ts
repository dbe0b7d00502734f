import type { QueryExecutor } from './executor.ts';
import type { QueryRequest } from './queries.ts';

/**
 * A small statement's whole answer as rows, through the query executor (sandbox, permissions,
 * admission, time limit), for endpoints that shape rows themselves rather than stream them.
 */
export async function collectRows(queries: QueryExecutor, req: Omit<QueryRequest, 'sendNull' | 'timeFormat' | 'streaming'>): Promise<Record<string, unknown>[]> {
  const answer = await queries.execute({ ...req, sendNull: true, timeFormat: 'iso', streaming: false });
  const chunks: string[] = [];
  for await (const chunk of answer.chunks) chunks.push(chunk);
  return JSON.parse(`[${chunks.join(',')}]`) as Record<string, unknown>[];
}
