import { DomainError, type ErrorKind } from '../../errors.ts';

/** The one map from a domain error's kind to a PostgreSQL SQLSTATE (the wire's counterpart of errors.ts' status map). */
export const SQLSTATE: Record<ErrorKind, string> = {
  invalid: '42601', // syntax_error (the sandbox's refusals are about what the statement says)
  unauthorized: '28P01', // invalid_password
  forbidden: '42501', // insufficient_privilege
  not_found: '42P01', // undefined_table
  timeout: '57014', // query_canceled (PostgreSQL's statement_timeout uses it too)
  conflict: '40001',
  too_large: '54000', // program_limit_exceeded
  unsupported: '0A000', // feature_not_supported
  too_many_requests: '53300', // too_many_connections
  storage: 'XX000', // internal_error
  unavailable: '57P03', // cannot_connect_now
  cancelled: '57014', // query_canceled
  internal: 'XX000', // internal_error
};

/** An error whose SQLSTATE is more precise than its kind's (protocol-level and value conditions). */
export class PgError extends DomainError {
  constructor(
    kind: ConstructorParameters<typeof DomainError>[0],
    message: string,
    readonly sqlstate: string,
  ) {
    super(kind, message);
  }
}

/**
 * DuckDB's error classes (the first words of its messages) → PostgreSQL's SQLSTATE, for statements
 * refused as invalid: clients raise by class (psycopg a SyntaxError for 42601, DataError for 22xxx,
 * ProgrammingError for 42703/42883), so a type error must not read as a syntax error.
 */
const DUCKDB_SQLSTATES: [RegExp, string][] = [
  [/^Conversion Error: .*(out of range|overflow)/i, '22003'], // numeric_value_out_of_range
  [/^Conversion Error/, '22P02'], // invalid_text_representation
  [/^Out of Range Error/, '22003'],
  [/^Binder Error: Referenced column .* not found/, '42703'], // undefined_column
  [/^Binder Error: (Cannot compare|Cannot mix)/, '42804'], // datatype_mismatch
  [/^Binder Error: No (function|operator) matches/, '42883'], // undefined_function
  [/^Catalog Error: (Scalar|Table|Aggregate) Function with name/, '42883'],
  [/^Catalog Error: Table with name/, '42P01'], // undefined_table
  [/^Invalid Input Error/, '22023'], // invalid_parameter_value
];

/** The SQLSTATE of an `invalid` error from its message, when DuckDB's class says more than 42601. */
export function invalidSqlstate(message: string): string {
  return DUCKDB_SQLSTATES.find(([re]) => re.test(message))?.[1] ?? SQLSTATE.invalid;
}
