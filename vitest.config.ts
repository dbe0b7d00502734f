import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/helpers/globalSetup.ts'],
    testTimeout: 60_000,
    // expect.poll waits for what a page or a server shows; on 2 busy cores that takes more than the
    // default second.
    expect: { poll: { timeout: 15_000, interval: 100 } },
    hookTimeout: 60_000,
    // Each test file starts its own servers; two at a time fits a 2-core machine.
    maxWorkers: 2,
    pool: 'forks',
  },
});
