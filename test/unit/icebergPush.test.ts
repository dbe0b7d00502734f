import { describe, expect, it } from 'vitest';
import { emptyTable, type TableMetadata } from '../../src/storage/iceberg/metadata.ts';
import { planPush, type TheirTable } from '../../src/storage/iceberg/push.ts';

/**
 * The commit the push sends to an external catalog (src/storage/iceberg/push.ts): what makes its copy of
 * the table show ours, under requirements that fail when its `main` moved since it was loaded.
 */

const base = emptyTable('file:///store/ds', { t: 'TIMESTAMP', n: 'BIGINT' }, 't', 1000);
const snap = (id: number, seq: number) => ({ 'snapshot-id': id, 'sequence-number': seq, 'timestamp-ms': 1000 + seq, 'manifest-list': `file:///store/ds/l${id}.avro`, summary: { operation: 'append' } });
const ours = (snapshots: ReturnType<typeof snap>[], extra: Partial<TableMetadata> = {}): TableMetadata => ({
  ...base,
  snapshots,
  'current-snapshot-id': snapshots.at(-1)?.['snapshot-id'] ?? -1,
  'last-sequence-number': snapshots.at(-1)?.['sequence-number'] ?? 0,
  ...extra,
});
/** Their copy as a catalog answers it: registered from ours at some version, maybe with our extra property. */
const theirs = (m: TableMetadata, props: Record<string, string> = {}): TheirTable => ({ ...m, properties: { ...m.properties, ...props } });
const EXTRA = { 'write.metadata.path': 'file:///store/ds/.iceberg/g/metadata' };

describe('planPush', () => {
  it.each([
    ['in step', theirs(ours([snap(1, 1)]), EXTRA), ours([snap(1, 1)]), 'none'],
    ['another generation (uuid)', { ...theirs(ours([])), 'table-uuid': 'other' }, ours([]), 'replace'],
    ['this worker is behind (another pushed a newer version)', theirs(ours([snap(1, 1), snap(2, 2)]), EXTRA), ours([snap(1, 1)]), 'none'],
  ])('%s → %s', (_case, t, o, kind) => {
    expect(planPush(t, o, EXTRA).kind).toBe(kind);
  });

  it('adds our new snapshots in sequence order, moves main, drops expired ones, asserts their main', () => {
    const plan = planPush(theirs(ours([snap(1, 1), snap(2, 2)]), EXTRA), ours([snap(2, 2), snap(4, 4), snap(3, 3)], { 'current-snapshot-id': 4 }), EXTRA);
    expect(plan.kind).toBe('commit');
    if (plan.kind !== 'commit') return;
    expect(plan.body.requirements).toEqual([
      { type: 'assert-table-uuid', uuid: base['table-uuid'] },
      { type: 'assert-ref-snapshot-id', ref: 'main', 'snapshot-id': 2 },
    ]);
    expect(plan.body.updates).toEqual([
      { action: 'add-snapshot', snapshot: snap(3, 3) },
      { action: 'add-snapshot', snapshot: snap(4, 4) },
      { action: 'set-snapshot-ref', 'ref-name': 'main', type: 'branch', 'snapshot-id': 4 },
      { action: 'remove-snapshots', 'snapshot-ids': [1] },
    ]);
  });

  it('a table without snapshots there (-1 or absent) asserts that main does not exist yet, and sets our properties', () => {
    const plan = planPush({ ...theirs(ours([])), 'current-snapshot-id': -1 }, ours([snap(7, 1)]), EXTRA);
    if (plan.kind !== 'commit') throw new Error(plan.kind);
    expect(plan.body.requirements[1]).toEqual({ type: 'assert-ref-snapshot-id', ref: 'main', 'snapshot-id': null });
    expect(plan.body.updates).toContainEqual({ action: 'set-properties', updates: EXTRA });
  });

  it('a new schema (a column added) is added and made current, with the name mapping that names it', () => {
    const wider = emptyTable('file:///store/ds', { t: 'TIMESTAMP', n: 'BIGINT', s: 'VARCHAR' }, 't', 1000);
    const newSchema = { ...wider.schemas[0], 'schema-id': 1 };
    const mine = ours([], { schemas: [...base.schemas, newSchema], 'current-schema-id': 1, 'last-column-id': wider['last-column-id'], properties: wider.properties });
    const plan = planPush(theirs(ours([]), EXTRA), mine, EXTRA);
    if (plan.kind !== 'commit') throw new Error(plan.kind);
    expect(plan.body.updates).toEqual([
      { action: 'add-schema', schema: newSchema, 'last-column-id': wider['last-column-id'] },
      { action: 'set-current-schema', 'schema-id': -1 },
      { action: 'set-properties', updates: { 'schema.name-mapping.default': wider.properties['schema.name-mapping.default'] } },
    ]);
  });
});
