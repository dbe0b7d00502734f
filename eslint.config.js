// The linter of `npm test` (npm run lint): size and complexity limits that keep functions readable top to
// bottom and modules one concern each (docs/architecture.md), on top of typescript-eslint's recommended set.
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'console-dist/**', 'promql-dist/**', 'node_modules/**', 'src/ingest/otlp/generated.ts'] },
  {
    files: ['src/**/*.ts', 'console/src/**/*.{ts,tsx}'],
    extends: [tseslint.configs.recommended],
    rules: {
      'max-lines-per-function': ['error', { max: 80, skipBlankLines: true, skipComments: true }],
      // A module's every line counts (comments too): ≤ 400 lines as a file (issue 35).
      'max-lines': ['error', { max: 400, skipBlankLines: false, skipComments: false }],
      complexity: ['error', 25],
      'max-depth': ['error', 5],
      // `const { version: _v, ...rest } = x` drops a field on purpose.
      '@typescript-eslint/no-unused-vars': ['error', { ignoreRestSiblings: true }],
    },
  },
);
