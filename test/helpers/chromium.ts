import { execFileSync } from 'node:child_process';
import * as path from 'node:path';
import { chromium, type Browser } from 'playwright-core';

const root = path.resolve(import.meta.dirname, '../..');

/** Debian's Chromium, installed by the project's script when missing; throws when that is impossible. */
export function chromiumBinary(): string {
  if (process.env.CHROMIUM_PATH) return process.env.CHROMIUM_PATH;
  // Fonts so that screenshots show text; the package pulls in the rest.
  return execFileSync('bash', [path.join(root, 'scripts/ensure-deb.sh'), 'chromium', 'chromium', 'fonts-dejavu-core'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], timeout: 900_000 }).trim();
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
