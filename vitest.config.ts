import { defineConfig } from 'vitest/config';

// Two projects (test/README.md): `unit`, in-process tests of one module each, the loop to work in
// (`npm run test:unit`, seconds); `system`, tests that start the real service, S3 servers, browsers and
// real clients as processes (`npm run test:system`). `npm test` runs both.
export default defineConfig({
  test: {
    // expect.poll waits for what a page or a server shows; on 2 busy cores that takes more than the
    // default second.
    expect: { poll: { timeout: 15_000, interval: 100 } },
    pool: 'forks',
    // Two at a time fits a 2-core machine (each system test file starts its own servers).
    maxWorkers: 2,
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          // Generous for a loaded machine; a unit test that needs more is not a unit test.
          testTimeout: 30_000,
          // In-process tests share one module graph per worker instead of importing DuckDB, zod and the
          // OTLP classes again for every file: most of this project's time was imports.
          isolate: false,
        },
      },
      {
        extends: true,
        test: {
          name: 'system',
          include: ['test/*.test.ts'],
          // The service runs from dist/, as `npm start` runs it: built once per run, so it is never stale.
          globalSetup: ['test/helpers/globalSetup.ts'],
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
    ],
  },
});
