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
