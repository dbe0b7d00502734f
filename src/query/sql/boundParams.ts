import { DuckDBTimestampTZValue, DuckDBTimestampValue, type DuckDBConnection, type DuckDBPreparedStatement } from '@duckdb/node-api';

/**
 * A PostgreSQL parameter's value as DuckDB binds it to a prepared statement (issue 35): the statement
 * the sandbox checked and the service parsed once runs with its `$n` placeholders bound by DuckDB, so
 * a value never reaches a parser as SQL text and cannot change the statement's structure.
 *
 * `VARCHAR` (most values, in PostgreSQL's text form): DuckDB casts it to the type the statement gives
 * the placeholder, as it casts a string literal there — the same rows as the literal the door wrote
 * before. The typed kinds keep a type the client declared (int, float, bool) where the statement gives
 * the placeholder none (`SELECT $1`); `BLOB` carries bytes as hex (a message to a worker is text);
 * `TIMESTAMP`/`TIMESTAMPTZ` carry microseconds since 1970 (DuckDB's cast of text to TIMESTAMP drops a
 * UTC offset, so a timestamptz is read in the door, where its offset is applied).
 */
export type BoundParam =
  | null
  | { type: 'VARCHAR' | 'BLOB' | 'BOOLEAN' | 'SMALLINT' | 'INTEGER' | 'BIGINT' | 'UINTEGER' | 'FLOAT' | 'DOUBLE' | 'TIMESTAMP' | 'TIMESTAMPTZ'; text: string };

/**
 * Binds `params` in order ($1 first). Values past the statement's placeholders (PostgreSQL lets a client
 * declare more parameters than the statement uses) are not bound: DuckDB refuses an index it lacks.
 */
export function bindParams(prepared: DuckDBPreparedStatement, params: readonly BoundParam[]): void {
  params.slice(0, prepared.parameterCount).forEach((p, i) => bindOne(prepared, i + 1, p));
}

/**
 * `sql` prepared once, its placeholders bound to `params` (none: nothing bound), handed to `use`, and the
 * prepared statement released whatever `use` does (a result it returns outlives it, as DuckDB allows).
 */
export async function withPrepared<T>(conn: DuckDBConnection, sql: string, params: readonly BoundParam[] | undefined, use: (prepared: DuckDBPreparedStatement) => Promise<T>): Promise<T> {
  const prepared = await conn.prepare(sql);
  try {
    if (params) bindParams(prepared, params);
    return await use(prepared);
  } finally {
    prepared.destroySync();
  }
}

function bindOne(prepared: DuckDBPreparedStatement, at: number, p: BoundParam): void {
  if (p === null) return prepared.bindNull(at);
  switch (p.type) {
    case 'VARCHAR': return prepared.bindVarchar(at, p.text);
    case 'BLOB': return prepared.bindBlob(at, Buffer.from(p.text, 'hex'));
    case 'BOOLEAN': return prepared.bindBoolean(at, p.text === 'true');
    case 'SMALLINT': return prepared.bindSmallInt(at, Number(p.text));
    case 'INTEGER': return prepared.bindInteger(at, Number(p.text));
    case 'UINTEGER': return prepared.bindUInteger(at, Number(p.text));
    case 'BIGINT': return prepared.bindBigInt(at, BigInt(p.text));
    case 'FLOAT': return prepared.bindFloat(at, Number(p.text));
    case 'DOUBLE': return prepared.bindDouble(at, Number(p.text));
    case 'TIMESTAMP': return prepared.bindTimestamp(at, new DuckDBTimestampValue(BigInt(p.text)));
    case 'TIMESTAMPTZ': return prepared.bindTimestampTZ(at, new DuckDBTimestampTZValue(BigInt(p.text)));
  }
}
