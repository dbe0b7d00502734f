import { execFileSync } from 'node:child_process';
import { findBinary } from './binaries.ts';
import * as path from 'node:path';
import { chromium, type Browser } from 'playwright-core';

const root = path.resolve(import.meta.dirname, '../..');

/**
 * Debian's Chromium (CHROMIUM_PATH, else on the PATH), as scripts/test-setup.d/20-chromium.sh installed
 * it; throws, saying what to run, when it is absent. Tests install nothing themselves.
 */
export function chromiumBinary(): string {
  return findBinary('chromium', process.env.CHROMIUM_PATH);
}

/** Builds the console bundle (a second or two), so the test runs on the current source. */
export function buildConsole(): void {
  execFileSync(process.execPath, ['--import', 'tsx', path.join(root, 'scripts/build-console.ts')], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'], timeout: 120_000 });
}

/**
 * Headless Chromium with everything that would phone home switched off: the test's only traffic is to
 * the server on 127.0.0.1.
 */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: chromiumBinary(),
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
    timeout: 60_000,
  });
}
