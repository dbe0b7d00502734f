import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Each test file starts its own servers; two at a time fits a 2-core machine.
    maxWorkers: 2,
    pool: 'forks',
  },
});
