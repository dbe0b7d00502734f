import { DuckDBTypeId, type DuckDBType } from '@duckdb/node-api';

/*
 * Each DuckDB column type's PostgreSQL type (OID, length, name) as a RowDescription announces it
 * (pg.ts encodes the values; the catalog's own types are in query/catalog/).
 */

export interface PgType {
  oid: number;
  /** pg_type.typlen: fixed size in bytes, -1 for variable length. */
  size: number;
  name: string;
}

export const T = (oid: number, size: number, name: string): PgType => ({ oid, size, name });
export const PG = {
  bool: T(16, 1, 'bool'),
  bytea: T(17, -1, 'bytea'),
  int8: T(20, 8, 'int8'),
  int2: T(21, 2, 'int2'),
  int4: T(23, 4, 'int4'),
  text: T(25, -1, 'text'),
  oid: T(26, 4, 'oid'),
  json: T(114, -1, 'json'),
  float4: T(700, 4, 'float4'),
  float8: T(701, 8, 'float8'),
  varchar: T(1043, -1, 'varchar'),
  date: T(1082, 4, 'date'),
  time: T(1083, 8, 'time'),
  timestamp: T(1114, 8, 'timestamp'),
  timestamptz: T(1184, 8, 'timestamptz'),
  interval: T(1186, 16, 'interval'),
  numeric: T(1700, -1, 'numeric'),
  uuid: T(2950, 16, 'uuid'),
} as const;

/**
 * Array type OIDs by element OID (PostgreSQL 15's pg_type.typarray): the one table of them, for result
 * columns and parameters here and for the emulated catalog's pg_type (query/catalog/catalogSql.ts).
 */
export const ARRAY_OF: Readonly<Record<number, number>> = {
  16: 1000, 17: 1001, 18: 1002, 19: 1003, 20: 1016, 21: 1005, 23: 1007, 24: 1008, 25: 1009, 26: 1028, 114: 199, 700: 1021,
  701: 1022, 1042: 1014, 1043: 1015, 1082: 1182, 1083: 1183, 1114: 1115, 1184: 1185, 1186: 1187, 1700: 1231, 2205: 2210,
  2206: 2211, 2950: 2951, 3802: 3807,
};
/** Element OID by array OID (for parameters a client sends as arrays). */
export const ELEMENT_OF: Record<number, number> = Object.fromEntries(Object.entries(ARRAY_OF).map(([e, a]) => [a, Number(e)]));

/** The PostgreSQL type of each scalar DuckDB type that has one. */
const SCALAR_PG: ReadonlyMap<DuckDBTypeId, PgType> = new Map<DuckDBTypeId, PgType>([
  [DuckDBTypeId.BOOLEAN, PG.bool],
  [DuckDBTypeId.TINYINT, PG.int2],
  [DuckDBTypeId.SMALLINT, PG.int2],
  [DuckDBTypeId.UTINYINT, PG.int2],
  [DuckDBTypeId.INTEGER, PG.int4],
  [DuckDBTypeId.USMALLINT, PG.int4],
  [DuckDBTypeId.BIGINT, PG.int8],
  [DuckDBTypeId.UINTEGER, PG.int8],
  [DuckDBTypeId.UBIGINT, PG.numeric],
  [DuckDBTypeId.HUGEINT, PG.numeric],
  [DuckDBTypeId.UHUGEINT, PG.numeric],
  [DuckDBTypeId.DECIMAL, PG.numeric],
  [DuckDBTypeId.FLOAT, PG.float4],
  [DuckDBTypeId.DOUBLE, PG.float8],
  [DuckDBTypeId.VARCHAR, PG.text],
  [DuckDBTypeId.BLOB, PG.bytea],
  [DuckDBTypeId.DATE, PG.date],
  [DuckDBTypeId.TIME, PG.time],
  [DuckDBTypeId.TIMESTAMP, PG.timestamp],
  [DuckDBTypeId.TIMESTAMP_S, PG.timestamp],
  [DuckDBTypeId.TIMESTAMP_MS, PG.timestamp],
  [DuckDBTypeId.TIMESTAMP_NS, PG.timestamp],
  [DuckDBTypeId.TIMESTAMP_TZ, PG.timestamptz],
  [DuckDBTypeId.INTERVAL, PG.interval],
  [DuckDBTypeId.UUID, PG.uuid],
]);

/** The PostgreSQL type of a scalar DuckDB type, or undefined when it has none. */
function scalarPgType(type: DuckDBType): PgType | undefined {
  if (type.alias?.toUpperCase() === 'JSON') return PG.json;
  return SCALAR_PG.get(type.typeId);
}

/** The column's PostgreSQL type as a RowDescription announces it. */
export function pgTypeOf(type: DuckDBType): PgType {
  if (type.typeId === DuckDBTypeId.LIST) {
    const item = scalarPgType((type as DuckDBType & { valueType: DuckDBType }).valueType);
    if (item && ARRAY_OF[item.oid]) return { oid: ARRAY_OF[item.oid], size: -1, name: `_${item.name}` };
    return PG.text;
  }
  return scalarPgType(type) ?? PG.text;
}
