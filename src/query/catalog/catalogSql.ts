/**
 * What the catalog database (catalog.ts) adds to DuckDB's own pg_catalog so that client introspection
 * reads as it would on PostgreSQL: macros for catalog functions DuckDB lacks, the `::regclass`-style
 * casts (rewritten into the `__pg_` macros), and empty relations clients join against. Values are
 * those of a server with one read-only role and no indexes, constraints, sequences or inheritance.
 */

import { ARRAY_OF, ELEMENT_OF } from '../results/pgTypes.ts';
import { FIXED } from './settings.ts';

/** A table macro `__<name>()` answering these rows (each a select list). */
const relation = (name: string, rows: string[]) => `CREATE MACRO __${name}() AS TABLE ${rows.map((r) => `SELECT ${r}`).join(' UNION ALL ')}`;

/** A table macro `__<name>()` with these columns and no rows. */
const empty = (name: string, columns: string) =>
  `CREATE MACRO __${name}() AS TABLE SELECT ${columns
    .split(',')
    .map((c) => c.trim().split(/\s+/))
    .map(([col, ...type]) => `NULL::${type.join(' ')} AS ${col}`)
    .join(', ')} WHERE false`;

/** Catalog relations answered by the macros below instead of DuckDB's (or in its absence). */
export const RELATION_MACROS = new Set<string>();

/** PostgreSQL's built-in types clients look up: [oid, name, length, category, SQL name]; element and array oids from results/pg.ts. */
const TYPES: [number, string, number, string, string][] = [
  [16, 'bool', 1, 'B', 'boolean'],
  [17, 'bytea', -1, 'U', 'bytea'],
  [18, 'char', 1, 'Z', '"char"'],
  [19, 'name', 64, 'S', 'name'],
  [20, 'int8', 8, 'N', 'bigint'],
  [21, 'int2', 2, 'N', 'smallint'],
  [23, 'int4', 4, 'N', 'integer'],
  [24, 'regproc', 4, 'N', 'regproc'],
  [25, 'text', -1, 'S', 'text'],
  [26, 'oid', 4, 'N', 'oid'],
  [114, 'json', -1, 'U', 'json'],
  [700, 'float4', 4, 'N', 'real'],
  [701, 'float8', 8, 'N', 'double precision'],
  [705, 'unknown', -2, 'X', 'unknown'],
  [1042, 'bpchar', -1, 'S', 'character'],
  [1043, 'varchar', -1, 'S', 'character varying'],
  [1082, 'date', 4, 'D', 'date'],
  [1083, 'time', 8, 'D', 'time without time zone'],
  [1114, 'timestamp', 8, 'D', 'timestamp without time zone'],
  [1184, 'timestamptz', 8, 'D', 'timestamp with time zone'],
  [1186, 'interval', 16, 'T', 'interval'],
  [1700, 'numeric', -1, 'N', 'numeric'],
  [2205, 'regclass', 4, 'N', 'regclass'],
  [2206, 'regtype', 4, 'N', 'regtype'],
  [2950, 'uuid', 16, 'U', 'uuid'],
  [3802, 'jsonb', -1, 'U', 'jsonb'],
  [1000, '_bool', -1, 'A', 'boolean[]'],
  [1001, '_bytea', -1, 'A', 'bytea[]'],
  [1005, '_int2', -1, 'A', 'smallint[]'],
  [1007, '_int4', -1, 'A', 'integer[]'],
  [1009, '_text', -1, 'A', 'text[]'],
  [1015, '_varchar', -1, 'A', 'character varying[]'],
  [1016, '_int8', -1, 'A', 'bigint[]'],
  [1021, '_float4', -1, 'A', 'real[]'],
  [1022, '_float8', -1, 'A', 'double precision[]'],
  [1028, '_oid', -1, 'A', 'oid[]'],
  [1115, '_timestamp', -1, 'A', 'timestamp without time zone[]'],
  [1182, '_date', -1, 'A', 'date[]'],
  [1185, '_timestamptz', -1, 'A', 'timestamp with time zone[]'],
  [1231, '_numeric', -1, 'A', 'numeric[]'],
  [199, '_json', -1, 'A', 'json[]'],
  [2951, '_uuid', -1, 'A', 'uuid[]'],
];

/** PostgreSQL's pg_catalog and information_schema namespace oids. */
const PG_CATALOG_NS = 11;
const INFORMATION_SCHEMA_NS = 13_000;

/** A DuckDB column type name (duckdb_columns().data_type) → its PostgreSQL type oid; as pgRows.ts maps result columns. */
const OID_OF_DUCKDB_TYPE = `CASE
  WHEN t IN ('VARCHAR') THEN 25 WHEN t = 'JSON' THEN 114 WHEN t = 'BOOLEAN' THEN 16
  WHEN t IN ('TINYINT', 'SMALLINT', 'UTINYINT') THEN 21 WHEN t IN ('INTEGER', 'USMALLINT') THEN 23 WHEN t IN ('BIGINT', 'UINTEGER') THEN 20
  WHEN t IN ('UBIGINT', 'HUGEINT', 'UHUGEINT') OR t LIKE 'DECIMAL%' THEN 1700 WHEN t = 'FLOAT' THEN 700 WHEN t = 'DOUBLE' THEN 701
  WHEN t = 'BLOB' THEN 17 WHEN t = 'DATE' THEN 1082 WHEN t = 'TIME' THEN 1083
  WHEN t IN ('TIMESTAMP', 'TIMESTAMP_S', 'TIMESTAMP_MS', 'TIMESTAMP_NS') THEN 1114 WHEN t = 'TIMESTAMP WITH TIME ZONE' THEN 1184
  WHEN t = 'INTERVAL' THEN 1186 WHEN t = 'UUID' THEN 2950
  WHEN t = 'VARCHAR[]' THEN 1009 WHEN t = 'BIGINT[]' THEN 1016 WHEN t = 'DOUBLE[]' THEN 1022 WHEN t = 'BOOLEAN[]' THEN 1000
  WHEN t = 'INTEGER[]' THEN 1007 WHEN t = 'TIMESTAMP[]' THEN 1115
  ELSE 25 END`;

export const CATALOG_SQL: string[] = [
  // current_setting() of PostgreSQL's settings (DuckDB's knows DuckDB's, and would reveal them).
  `CREATE MACRO __pg_setting(name) AS CASE lower(name) ${Object.entries(FIXED)
    .map(([k, v]) => `WHEN '${k}' THEN '${v.replaceAll("'", "''")}'`)
    .join(' ')} ELSE NULL END`,
  `CREATE MACRO __pg_setting2(name, missing_ok) AS __pg_setting(name)`,
  `CREATE MACRO parse_ident(x) AS list_transform(string_split(CAST(x AS VARCHAR), '.'), p -> trim(p, '"'))`,
  `CREATE MACRO array_length(a, d) AS len(a)`,
  `CREATE MACRO __pg_type_oid(t) AS ${OID_OF_DUCKDB_TYPE}`,
  relation(
    'pg_type',
    TYPES.map(
      ([oid, name, len, cat]) =>
        `${oid}::BIGINT AS oid, '${name}' AS typname, ${PG_CATALOG_NS}::BIGINT AS typnamespace, 10::BIGINT AS typowner, ${len}::SMALLINT AS typlen, ${len > 0 && len <= 8} AS typbyval, ` +
        `'b' AS typtype, '${cat}' AS typcategory, false AS typispreferred, true AS typisdefined, ',' AS typdelim, 0::BIGINT AS typrelid, ${ELEMENT_OF[oid] ?? 0}::BIGINT AS typelem, ${ARRAY_OF[oid] ?? 0}::BIGINT AS typarray, ` +
        `'${name}in' AS typinput, '${name}out' AS typoutput, '${name}recv' AS typreceive, '${name}send' AS typsend, 0::BIGINT AS typmodin, 0::BIGINT AS typmodout, 0::BIGINT AS typanalyze, ` +
        `'i' AS typalign, 'p' AS typstorage, false AS typnotnull, 0::BIGINT AS typbasetype, -1 AS typtypmod, 0 AS typndims, 0::BIGINT AS typcollation, NULL::VARCHAR AS typdefaultbin, NULL::VARCHAR AS typdefault, NULL::VARCHAR[] AS typacl`,
    ),
  ),
  `CREATE MACRO __pg_format_type(oid, typmod) AS CASE ${TYPES.map(([o, , , , sqlName]) => `WHEN oid = ${o} THEN '${sqlName.replaceAll("'", "''")}'`).join(' ')} ELSE NULL END`,
  // Columns of the dataset tables (schema public), typed with PostgreSQL oids.
  `CREATE MACRO __pg_attribute() AS TABLE
     SELECT table_oid::BIGINT AS attrelid, column_name AS attname, __pg_type_oid(data_type)::BIGINT AS atttypid, -1 AS attstattarget,
       (SELECT typlen FROM __pg_type() WHERE oid = __pg_type_oid(data_type)) AS attlen, column_index::SMALLINT AS attnum,
       CASE WHEN data_type LIKE '%[]' THEN 1 ELSE 0 END AS attndims, -1 AS attcacheoff, -1 AS atttypmod, false AS attbyval, 'p' AS attstorage, 'i' AS attalign,
       NOT is_nullable AS attnotnull, column_default IS NOT NULL AS atthasdef, false AS atthasmissing, '' AS attidentity, '' AS attgenerated,
       false AS attisdropped, true AS attislocal, '' AS attcompression, 0 AS attinhcount, 0::BIGINT AS attcollation, NULL::VARCHAR[] AS attacl, NULL::VARCHAR[] AS attoptions, NULL::VARCHAR[] AS attfdwoptions
     FROM duckdb_columns() WHERE schema_name = 'public'`,
  `CREATE MACRO __pg_class() AS TABLE
     SELECT * REPLACE (CASE WHEN relkind = 'r' THEN 2 ELSE 0 END::BIGINT AS relam, NULL::VARCHAR[] AS reloptions, NULL::VARCHAR[] AS relacl, 10::BIGINT AS relowner,
       'd' AS relreplident), false AS relforcerowsecurity FROM pg_catalog.pg_class`,
  relation('pg_am', [`2::BIGINT AS oid, 'heap' AS amname, 'heap_tableam_handler' AS amhandler, 't' AS amtype`]),
  `CREATE MACRO __pg_namespace() AS TABLE
     SELECT oid, nspname, 10::BIGINT AS nspowner, nspacl FROM pg_catalog.pg_namespace WHERE nspname <> 'main'
     UNION ALL SELECT ${PG_CATALOG_NS}, 'pg_catalog', 10, NULL UNION ALL SELECT ${INFORMATION_SCHEMA_NS}, 'information_schema', 10, NULL`,
  // Casts: a number stays the oid; a name is looked up (schema qualifier and quotes dropped).
  `CREATE MACRO __pg_unqualify(x) AS regexp_replace(regexp_replace(CAST(x AS VARCHAR), '^.*\\.', ''), '"', '', 'g')`,
  `CREATE MACRO __pg_regclass(x) AS COALESCE(TRY_CAST(x AS BIGINT), (SELECT min(oid) FROM pg_catalog.pg_class WHERE relname = __pg_unqualify(x)))`,
  `CREATE MACRO __pg_regtype(x) AS COALESCE(TRY_CAST(x AS BIGINT), (SELECT min(oid) FROM __pg_type() WHERE typname = __pg_unqualify(x)))`,
  `CREATE MACRO __pg_regnamespace(x) AS COALESCE(TRY_CAST(x AS BIGINT), (SELECT min(oid) FROM pg_catalog.pg_namespace WHERE nspname = __pg_unqualify(x)))`,
  `CREATE MACRO __pg_oid(x) AS TRY_CAST(x AS BIGINT)`,
  `CREATE MACRO to_regtype(x) AS (SELECT min(oid) FROM __pg_type() WHERE typname = __pg_unqualify(x))`,
  `CREATE MACRO to_regclass(x) AS (SELECT min(oid) FROM pg_catalog.pg_class WHERE relname = __pg_unqualify(x))`,
  `CREATE MACRO __pg_name(x) AS CAST(x AS VARCHAR)`,
  // Catalog functions DuckDB lacks.
  // Clients parse "PostgreSQL <major>.<minor>" from it; nothing about the engine or the build behind it.
  `CREATE MACRO __pg_version() AS 'PostgreSQL 15.0 (telemetry lakehouse)'`,
  `CREATE MACRO pg_get_userbyid(id) AS 'lakehouse'`,
  // The identity the catalog names everywhere (pg_database, pg_roles, getCatalogs()), not DuckDB's
  // `memory` and `duckdb`.
  `CREATE MACRO __pg_current_database() AS 'lakehouse'`,
  `CREATE MACRO __pg_current_user() AS 'lakehouse'`,
  // No backend can be signalled or function shown: PostgreSQL's answers for a role without the right.
  `CREATE MACRO pg_terminate_backend(pid) AS false, (pid, timeout) AS false`,
  `CREATE MACRO pg_cancel_backend(pid) AS false`,
  `CREATE MACRO pg_get_functiondef(oid) AS NULL::VARCHAR`,
  `CREATE MACRO pg_encoding_to_char(e) AS 'UTF8'`,
  `CREATE MACRO pg_get_indexdef(a) AS NULL::VARCHAR, (a, b, c) AS NULL::VARCHAR`,
  `CREATE MACRO pg_get_partkeydef(a) AS NULL::VARCHAR`,
  `CREATE MACRO array_upper(a, d) AS len(a)`,
  // A set-returning function in PostgreSQL; here one row per call is enough: it is only ever applied to
  // index keys, and no dataset has an index.
  `CREATE MACRO _pg_expandarray(a) AS {'x': a[1], 'n': 1}`,
  `CREATE MACRO array_lower(a, d) AS CASE WHEN len(a) > 0 THEN 1 END`,
  // No column has a default expression; this shadows DuckDB's, which lacks the 3-argument form.
  `CREATE MACRO pg_get_expr(a, b) AS NULL::VARCHAR, (a, b, c) AS NULL::VARCHAR`,
  `CREATE MACRO pg_get_triggerdef(a) AS NULL::VARCHAR, (a, b) AS NULL::VARCHAR`,
  `CREATE MACRO pg_get_ruledef(a) AS NULL::VARCHAR, (a, b) AS NULL::VARCHAR`,
  `CREATE MACRO pg_get_statisticsobjdef_columns(a) AS NULL::VARCHAR`,
  `CREATE MACRO pg_get_function_identity_arguments(a) AS ''`,
  `CREATE MACRO pg_get_function_arguments(a) AS ''`,
  `CREATE MACRO pg_get_function_result(a) AS NULL::VARCHAR`,
  `CREATE MACRO pg_get_serial_sequence(a, b) AS NULL::VARCHAR`,
  `CREATE MACRO pg_total_relation_size(a) AS 0::BIGINT`,
  `CREATE MACRO pg_relation_size(a) AS 0::BIGINT, (a, b) AS 0::BIGINT`,
  `CREATE MACRO pg_table_size(a) AS 0::BIGINT`,
  `CREATE MACRO pg_backend_pid() AS 0`,
  `CREATE MACRO pg_is_in_recovery() AS false`,
  `CREATE MACRO pg_relation_is_publishable(a) AS false`,
  `CREATE MACRO quote_ident(a) AS CASE WHEN regexp_full_match(CAST(a AS VARCHAR), '[a-z_][a-z0-9_]*') THEN CAST(a AS VARCHAR) ELSE '"' || replace(CAST(a AS VARCHAR), '"', '""') || '"' END`,
  // Relations DuckDB's pg_catalog lacks or answers differently, as table macros (tables would show in
  // pg_class themselves); catalog.ts rewrites a reference to `pg_x` into `__pg_x()`.
  relation('pg_database', [
    `1::BIGINT AS oid, 'lakehouse' AS datname, 10::BIGINT AS datdba, 6 AS encoding, 'c' AS datlocprovider, false AS datistemplate, true AS datallowconn,
     -1 AS datconnlimit, 0::BIGINT AS datfrozenxid, 0::BIGINT AS datminmxid, 0::BIGINT AS dattablespace, 'C' AS datcollate, 'C' AS datctype,
     NULL::VARCHAR AS daticulocale, NULL::VARCHAR AS daticurules, NULL::VARCHAR AS datcollversion, NULL::VARCHAR[] AS datacl`,
  ]),
  // PostgreSQL's settings as this server presents them (settings.ts), never DuckDB's: those name the
  // service's directories, its memory and thread limits and its extensions.
  relation(
    'pg_settings',
    Object.entries(FIXED).map(
      ([name, value]) =>
        `'${name}' AS name, '${value.replaceAll("'", "''")}' AS setting, NULL::VARCHAR AS unit, 'Preset Options' AS category, '' AS short_desc, NULL::VARCHAR AS extra_desc, 'internal' AS context, ` +
        `${/^-?\d+$/.test(value) ? "'integer'" : /^(on|off)$/.test(value) ? "'bool'" : "'string'"} AS vartype, 'default' AS source, NULL::VARCHAR AS min_val, NULL::VARCHAR AS max_val, NULL::VARCHAR[] AS enumvals, ` +
        `'${value.replaceAll("'", "''")}' AS boot_val, '${value.replaceAll("'", "''")}' AS reset_val, NULL::VARCHAR AS sourcefile, NULL::INTEGER AS sourceline, false AS pending_restart`,
    ),
  ),
  // information_schema.columns as PostgreSQL 15 answers it: its SQL type names (`data_type`, ARRAY for
  // arrays) and `udt_name` (the pg_type name), which Metabase's column sync and Grafana's query builder
  // read to tell times and numbers from text. DuckDB's own view has its type names and no udt_name.
  `CREATE MACRO __information_schema_columns() AS TABLE
     SELECT 'lakehouse' AS table_catalog, schema_name AS table_schema, table_name, column_name, column_index::INTEGER AS ordinal_position,
       NULL::VARCHAR AS column_default, CASE WHEN is_nullable THEN 'YES' ELSE 'NO' END AS is_nullable,
       CASE WHEN data_type LIKE '%[]' THEN 'ARRAY' ELSE __pg_format_type(__pg_type_oid(data_type), -1) END AS data_type,
       NULL::INTEGER AS character_maximum_length, CASE WHEN __pg_type_oid(data_type) = 25 THEN 1073741824 END::INTEGER AS character_octet_length,
       CASE __pg_type_oid(data_type) WHEN 21 THEN 16 WHEN 23 THEN 32 WHEN 20 THEN 64 WHEN 700 THEN 24 WHEN 701 THEN 53 END::INTEGER AS numeric_precision,
       CASE WHEN __pg_type_oid(data_type) IN (21, 23, 20, 700, 701) THEN 2 WHEN __pg_type_oid(data_type) = 1700 THEN 10 END::INTEGER AS numeric_precision_radix,
       CASE WHEN __pg_type_oid(data_type) IN (21, 23, 20) THEN 0 END::INTEGER AS numeric_scale,
       CASE WHEN __pg_type_oid(data_type) = 1082 THEN 0 WHEN __pg_type_oid(data_type) IN (1083, 1114, 1184, 1186) THEN 6 END::INTEGER AS datetime_precision,
       NULL::VARCHAR AS interval_type, NULL::INTEGER AS interval_precision,
       NULL::VARCHAR AS character_set_catalog, NULL::VARCHAR AS character_set_schema, NULL::VARCHAR AS character_set_name,
       NULL::VARCHAR AS collation_catalog, NULL::VARCHAR AS collation_schema, NULL::VARCHAR AS collation_name,
       NULL::VARCHAR AS domain_catalog, NULL::VARCHAR AS domain_schema, NULL::VARCHAR AS domain_name,
       'lakehouse' AS udt_catalog, 'pg_catalog' AS udt_schema, (SELECT typname FROM __pg_type() WHERE oid = __pg_type_oid(data_type)) AS udt_name,
       NULL::VARCHAR AS scope_catalog, NULL::VARCHAR AS scope_schema, NULL::VARCHAR AS scope_name, NULL::INTEGER AS maximum_cardinality,
       CAST(column_index AS VARCHAR) AS dtd_identifier, 'NO' AS is_self_referencing, 'NO' AS is_identity, NULL::VARCHAR AS identity_generation,
       NULL::VARCHAR AS identity_start, NULL::VARCHAR AS identity_increment, NULL::VARCHAR AS identity_maximum, NULL::VARCHAR AS identity_minimum,
       'NO' AS identity_cycle, 'NEVER' AS is_generated, NULL::VARCHAR AS generation_expression, 'NO' AS is_updatable
     FROM duckdb_columns() WHERE schema_name = 'public'`,
  // The schemas of this database, once each (DuckDB lists `main` of each of its catalogs).
  relation(
    'information_schema_schemata',
    ['public', 'pg_catalog', 'information_schema'].map(
      (name) =>
        `'lakehouse' AS catalog_name, '${name}' AS schema_name, 'lakehouse' AS schema_owner, NULL::VARCHAR AS default_character_set_catalog, NULL::VARCHAR AS default_character_set_schema, NULL::VARCHAR AS default_character_set_name, NULL::VARCHAR AS sql_path`,
    ),
  ),
  // PostgreSQL 15's collations every database has (SQLAlchemy 2.1 joins pg_collation when it reflects columns).
  relation('pg_collation', [
    `100::BIGINT AS oid, 'default' AS collname, ${PG_CATALOG_NS}::BIGINT AS collnamespace, 10::BIGINT AS collowner, 'd' AS collprovider, true AS collisdeterministic, -1 AS collencoding, NULL::VARCHAR AS collcollate, NULL::VARCHAR AS collctype, NULL::VARCHAR AS colliculocale, NULL::VARCHAR AS collversion`,
    `950::BIGINT, 'C', ${PG_CATALOG_NS}::BIGINT, 10::BIGINT, 'c', true, -1, 'C', 'C', NULL, NULL`,
    `951::BIGINT, 'POSIX', ${PG_CATALOG_NS}::BIGINT, 10::BIGINT, 'c', true, -1, 'POSIX', 'POSIX', NULL, NULL`,
  ]),
  relation('pg_roles', [
    `10::BIGINT AS oid, 'lakehouse' AS rolname, false AS rolsuper, true AS rolinherit, false AS rolcreaterole, false AS rolcreatedb, true AS rolcanlogin,
     false AS rolreplication, -1 AS rolconnlimit, NULL::TIMESTAMPTZ AS rolvaliduntil, false AS rolbypassrls, NULL::VARCHAR[] AS rolconfig, '********' AS rolpassword`,
  ]),
  relation('pg_user', [`'lakehouse' AS usename, 10::BIGINT AS usesysid, false AS usecreatedb, false AS usesuper, false AS userepl, false AS usebypassrls, NULL::TIMESTAMPTZ AS valuntil, NULL::VARCHAR[] AS useconfig`]),
  // No dataset has an index, a constraint, a default or a comment: PostgreSQL 15's columns, no rows.
  empty('pg_index', `indexrelid BIGINT, indrelid BIGINT, indnatts SMALLINT, indnkeyatts SMALLINT, indisunique BOOLEAN, indnullsnotdistinct BOOLEAN, indisprimary BOOLEAN, indisexclusion BOOLEAN, indimmediate BOOLEAN, indisclustered BOOLEAN, indisvalid BOOLEAN, indcheckxmin BOOLEAN, indisready BOOLEAN, indislive BOOLEAN, indisreplident BOOLEAN, indkey SMALLINT[], indcollation BIGINT[], indclass BIGINT[], indoption SMALLINT[], indexprs VARCHAR, indpred VARCHAR`),
  empty('pg_constraint', `oid BIGINT, conname VARCHAR, connamespace BIGINT, contype VARCHAR, condeferrable BOOLEAN, condeferred BOOLEAN, convalidated BOOLEAN, conrelid BIGINT, contypid BIGINT, conindid BIGINT, conparentid BIGINT, confrelid BIGINT, confupdtype VARCHAR, confdeltype VARCHAR, confmatchtype VARCHAR, conislocal BOOLEAN, coninhcount INTEGER, connoinherit BOOLEAN, conkey SMALLINT[], confkey SMALLINT[], conpfeqop BIGINT[], conppeqop BIGINT[], conffeqop BIGINT[], confdelsetcols SMALLINT[], conexclop BIGINT[], conbin VARCHAR`),
  empty('pg_description', `objoid BIGINT, classoid BIGINT, objsubid INTEGER, description VARCHAR`),
  empty('pg_attrdef', `oid BIGINT, adrelid BIGINT, adnum SMALLINT, adbin VARCHAR`),
  empty('pg_auth_members', `roleid BIGINT, member BIGINT, grantor BIGINT, admin_option BOOLEAN`),
  empty('pg_inherits', `inhrelid BIGINT, inhparent BIGINT, inhseqno INTEGER, inhdetachpending BOOLEAN`),
  empty('pg_partitioned_table', `partrelid BIGINT, partstrat VARCHAR, partnatts SMALLINT, partdefid BIGINT`),
  empty('pg_extension', `oid BIGINT, extname VARCHAR, extowner BIGINT, extnamespace BIGINT, extrelocatable BOOLEAN, extversion VARCHAR`),
  empty('pg_range', `rngtypid BIGINT, rngsubtype BIGINT, rngmultitypid BIGINT`),
  empty('pg_foreign_table', `ftrelid BIGINT, ftserver BIGINT`),
  empty('pg_matviews', `schemaname VARCHAR, matviewname VARCHAR, matviewowner VARCHAR, definition VARCHAR`),
  empty('pg_trigger', `oid BIGINT, tgrelid BIGINT, tgparentid BIGINT, tgname VARCHAR, tgfoid BIGINT, tgenabled VARCHAR, tgisinternal BOOLEAN, tgconstraint BIGINT`),
  empty('pg_rewrite', `oid BIGINT, rulename VARCHAR, ev_class BIGINT, ev_type VARCHAR`),
  empty('pg_policy', `oid BIGINT, polname VARCHAR, polrelid BIGINT, polcmd VARCHAR, polpermissive BOOLEAN, polroles BIGINT[], polqual VARCHAR, polwithcheck VARCHAR`),
  empty('pg_statistic_ext', `oid BIGINT, stxrelid BIGINT, stxname VARCHAR, stxnamespace BIGINT, stxkind VARCHAR[], stxstattarget INTEGER`),
  empty('pg_publication', `oid BIGINT, pubname VARCHAR, puballtables BOOLEAN, pubinsert BOOLEAN, pubupdate BOOLEAN, pubdelete BOOLEAN, pubtruncate BOOLEAN, pubviaroot BOOLEAN`),
  empty('pg_publication_rel', `oid BIGINT, prpubid BIGINT, prrelid BIGINT, prqual VARCHAR, prattrs SMALLINT[]`),
  empty('pg_publication_namespace', `oid BIGINT, pnpubid BIGINT, pnnspid BIGINT`),
  empty('pg_event_trigger', `oid BIGINT, evtname VARCHAR`),
  empty('pg_stat_activity', `datid BIGINT, datname VARCHAR, pid INTEGER, usename VARCHAR, application_name VARCHAR, state VARCHAR, query VARCHAR`),
  empty('pg_stat_user_tables', `relid BIGINT, schemaname VARCHAR, relname VARCHAR, n_live_tup BIGINT`),
  empty('pg_cursors', `name VARCHAR, statement VARCHAR, is_holdable BOOLEAN, is_binary BOOLEAN, is_scrollable BOOLEAN, creation_time TIMESTAMPTZ`),
  empty('pg_language', `oid BIGINT, lanname VARCHAR`),
  empty('pg_operator', `oid BIGINT, oprname VARCHAR, oprleft BIGINT, oprright BIGINT, oprresult BIGINT`),
  empty('pg_opclass', `oid BIGINT, opcmethod BIGINT, opcname VARCHAR, opcnamespace BIGINT, opcowner BIGINT, opcfamily BIGINT, opcintype BIGINT, opcdefault BOOLEAN, opckeytype BIGINT`),
  empty('pg_cast', `oid BIGINT, castsource BIGINT, casttarget BIGINT, castcontext VARCHAR`),
];

for (const stmt of CATALOG_SQL) {
  const m = /^CREATE MACRO __((?:pg|information_schema)_\w+)\(\) AS TABLE/.exec(stmt);
  if (m) RELATION_MACROS.add(m[1]);
}
