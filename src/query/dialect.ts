/** DataFusion functions Parseable dashboards use, as DuckDB macros (installed in every query worker). */
export const DIALECT_SQL: string[] = [];
