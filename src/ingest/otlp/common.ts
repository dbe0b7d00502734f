import type { ColumnType, FlatRow } from '../../model.ts';
import { copyRow } from '../names.ts';
import { putAttributes } from './attributes.ts';
import { int, list, msg, RecordRejection, str, type Msg, type Rejections } from './values.ts';

/** Resource and scope columns every signal carries. */
export const COMMON_KNOWN_TYPES: Record<string, ColumnType> = {
  resource_schema_url: 'VARCHAR',
  resource_dropped_attributes_count: 'BIGINT',
  scope_name: 'VARCHAR',
  scope_version: 'VARCHAR',
  scope_schema_url: 'VARCHAR',
  scope_dropped_attributes_count: 'BIGINT',
};

/**
 * What every record under one scope shares: the resource and scope attributes (scope wins on a clash)
 * and the resource/scope columns. They are kept apart because record attributes go between them:
 * record attributes override these attributes, fixed columns override any attribute.
 */
export interface Shared {
  attributes: FlatRow;
  fixed: FlatRow;
  /** Names of the attributes that came from the resource (not overridden by the scope), in order. */
  resourceKeys: string[];
}

export interface Envelope {
  /** ResourceLogs / ResourceSpans / ResourceMetrics field of the request. */
  resources: string;
  /** ScopeLogs / ScopeSpans / ScopeMetrics field of a resource. */
  scopes: string;
  /** LogRecord / Span / Metric field of a scope. */
  records: string;
}

/**
 * Calls `visit` for every record of an Export*ServiceRequest with the columns it inherits and its
 * path (for messages), e.g. `resourceLogs[0].scopeLogs[1].logRecords[2]`. A `RecordRejection` thrown
 * by `visit` leaves out that record and is counted in `rejections`. `recordPaths` false: a record's path
 * ends at its list (`…logRecords`), for a caller that never reports one (building it per record costs).
 */
export function forEachRecord(
  request: Msg,
  env: Envelope,
  rejections: Rejections,
  visit: (record: Msg, shared: Shared, at: string) => void,
  recordPaths = true,
): void {
  const resources = list(request[env.resources], env.resources);
  for (let r = 0; r < resources.length; r++) {
    const rAt = `${env.resources}[${r}]`;
    const rc = msg(resources[r], rAt);
    if (rc === null) continue;
    const rAttributes: FlatRow = {};
    const resource = msg(rc.resource, rAt, 'resource');
    if (resource !== null) putAttributes(rAttributes, resource.attributes, `${rAt}.resource`, 'attributes');
    // Fixed columns are always written (null when absent) so an attribute of the same name never
    // fills them; a null defines no column in storage.
    const rFixed: FlatRow = {
      resource_schema_url: str(rc.schemaUrl, rAt, 'schemaUrl'),
      resource_dropped_attributes_count: resource === null ? null : int(resource.droppedAttributesCount, `${rAt}.resource`, 'droppedAttributesCount'),
    };

    const scopes = list(rc[env.scopes], rAt, env.scopes);
    for (let s = 0; s < scopes.length; s++) {
      const sAt = `${rAt}.${env.scopes}[${s}]`;
      const sc = msg(scopes[s], sAt);
      if (sc === null) continue;
      const attributes: FlatRow = copyRow(rAttributes);
      const scope = msg(sc.scope, sAt, 'scope');
      if (scope !== null) putAttributes(attributes, scope.attributes, `${sAt}.scope`, 'attributes');
      const fixed: FlatRow = {
        ...rFixed,
        scope_name: scope === null ? null : str(scope.name, `${sAt}.scope`, 'name'),
        scope_version: scope === null ? null : str(scope.version, `${sAt}.scope`, 'version'),
        scope_schema_url: str(sc.schemaUrl, sAt, 'schemaUrl'),
        scope_dropped_attributes_count: scope === null ? null : int(scope.droppedAttributesCount, `${sAt}.scope`, 'droppedAttributesCount'),
      };

      // A scope attribute of the same name replaced the resource's value: that key is no longer the resource's.
      const resourceKeys = Object.keys(rAttributes).filter((k) => attributes[k] === rAttributes[k]);
      const shared: Shared = { attributes, fixed, resourceKeys };
      const records = list(sc[env.records], sAt, env.records);
      const recordsAt = `${sAt}.${env.records}`;
      for (let i = 0; i < records.length; i++) {
        const record = msg(records[i], recordsAt, i);
        if (record === null) continue;
        try {
          visit(record, shared, recordPaths ? `${recordsAt}[${i}]` : recordsAt);
        } catch (err) {
          if (!(err instanceof RecordRejection)) throw err;
          rejections.add(err.at, err.problem);
        }
      }
    }
  }
}

/** A new row: inherited attributes, then the record's own (which win), then the inherited fixed columns. */
export function startRow(shared: Shared, record: Msg, at: string, attributesField = 'attributes'): FlatRow {
  // Not `{ ...shared.attributes }`: V8 gives a spread copy a map that later property additions cannot
  // share, which made building rows ~20x slower; Object.assign (in copyRow) keeps the transitions.
  const row: FlatRow = copyRow(shared.attributes);
  putAttributes(row, record[attributesField], at, attributesField);
  Object.assign(row, shared.fixed);
  return row;
}
