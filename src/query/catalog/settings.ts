/**
 * The settings of the PostgreSQL 15 server this service presents, as `SHOW`, `current_setting()` and
 * `pg_settings` answer them: one list for the session commands (doors/pg) and the catalog database, so
 * that neither reveals DuckDB's own settings (or with them the service's directories and versions).
 */

/** Settings a SHOW answers when the session did not set them (names lower-case). */
export const FIXED: Record<string, string> = {
  server_version: '15.0',
  server_version_num: '150000',
  server_encoding: 'UTF8',
  client_encoding: 'UTF8',
  datestyle: 'ISO, MDY',
  intervalstyle: 'postgres',
  timezone: 'UTC',
  integer_datetimes: 'on',
  standard_conforming_strings: 'on',
  transaction_isolation: 'read committed',
  default_transaction_isolation: 'read committed',
  transaction_read_only: 'on',
  default_transaction_read_only: 'on',
  search_path: '"$user", public',
  max_identifier_length: '63',
  lc_collate: 'C',
  lc_ctype: 'C',
  is_superuser: 'off',
  statement_timeout: '0',
  extra_float_digits: '1',
  application_name: '',
  max_index_keys: '32',
  max_function_args: '100',
  block_size: '8192',
};
