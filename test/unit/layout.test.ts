import { describe, expect, it } from 'vitest';
import { compactedFileName, dataFileKey, flushFileStem, manifestKey, metaKey, parseKey, schemaKey } from '../../src/storage/layout.ts';

describe('layout: every key is built and parsed in one place', () => {
  const gen = '0123456789abcdef';
  it.each([
    [metaKey('app'), { role: 'metadata', dataset: 'app' }],
    [schemaKey('app', gen, 'node-1'), { role: 'schema', dataset: 'app', generation: gen, nodeId: 'node-1' }],
    [manifestKey('app', gen, 'node-1', 42), { role: 'manifest', dataset: 'app', generation: gen, nodeId: 'node-1', seq: 42 }],
    [dataFileKey('app', 'date=2026-11-22/hour=10/minute=05', `${flushFileStem(gen, 'node-1', 7)}_0.parquet`), { role: 'data', dataset: 'app', generation: gen, nodeId: 'node-1', seq: 7 }],
    [dataFileKey('my-logs', 'date=2026-11-22/hour=10', compactedFileName(gen, 'w_2', 9)), { role: 'data', dataset: 'my-logs', generation: gen, nodeId: 'w_2', seq: 9 }],
  ])('%s', (key, parsed) => {
    expect(parseKey(key)).toEqual(parsed);
  });
  it.each(['', 'app', '.streams/a/b.json', 'app/other/file.json', 'app/date=x/hour=y/notours.parquet', 'app/.manifests/g/node.12.json'])('not ours: %j', (key) => {
    expect(parseKey(key)).toBeUndefined();
  });
});
