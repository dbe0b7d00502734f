import type { Context, Hono } from 'hono';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import type { AppEnv } from '../../shared/context.ts';

/** Where `npm run build:console` (run by prestart/pretest) writes the console: the checkout's, from dist/doors/http or src/doors/http. */
export const CONSOLE_DIR = path.resolve(import.meta.dirname, '../../../../console-dist');

/**
 * The console talks only to this origin and runs only its own bundle: no inline script, no third-party
 * anything. The one exception to "styles from files only" is CodeMirror, which writes its base theme
 * into a <style> element: that element carries the page's per-response nonce (the page hands it to
 * the editor through a meta tag), so no 'unsafe-inline' is needed. Element styles set through the
 * CSSOM (uPlot, the bars of the waterfall) are not governed by CSP.
 */
export function consoleCsp(nonce: string): string {
  return CSP_TEMPLATE.replace('%NONCE%', nonce);
}

const CSP_TEMPLATE = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'nonce-%NONCE%'",
  "img-src 'self' data: blob:",
  "font-src 'self'",
  "connect-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.map': 'application/json; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
  '.woff2': 'font/woff2',
};

// Asset names as the build writes them: no slashes, no leading dot (so never `..`).
const ASSET_NAME = /^[A-Za-z0-9_-][A-Za-z0-9._-]*$/;

const NOT_BUILT = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Telemetry lakehouse</title></head>
<body><h1>Telemetry lakehouse</h1><p>The service is running. The web console is not built: run
<code>npm run build:console</code> (npm start and npm test do it), then reload.</p></body></html>`;

function securityHeaders(c: Context<AppEnv>, nonce = randomBytes(16).toString('base64')): void {
  c.header('Content-Security-Policy', consoleCsp(nonce));
  c.header('X-Content-Type-Options', 'nosniff');
  c.header('Referrer-Policy', 'no-referrer');
  c.header('Cross-Origin-Opener-Policy', 'same-origin');
}

const readOrUndefined = (file: string) => fs.readFile(file).catch(() => undefined);

/**
 * The web console's static files, registered before the API-key middleware: the page and its assets
 * are public (they hold no data); every API call the console makes carries the user's key. `GET /`
 * answering 200 is also what Grafana's data-source health check needs.
 */
export function registerConsoleRoutes(app: Hono<AppEnv>, dir = CONSOLE_DIR): void {
  const index = async (c: Context<AppEnv>) => {
    const nonce = randomBytes(16).toString('base64');
    securityHeaders(c, nonce);
    // The page names the current hashed bundles and carries a fresh nonce: always fetched again.
    c.header('Cache-Control', 'no-cache');
    const html = await readOrUndefined(path.join(dir, 'index.html'));
    return c.html(html ? html.toString('utf8').replaceAll('%NONCE%', nonce) : NOT_BUILT);
  };
  app.get('/', index);
  app.get('/index.html', index);

  app.get('/assets/:file', async (c) => {
    const name = c.req.param('file');
    const type = TYPES[path.extname(name)];
    securityHeaders(c);
    if (!ASSET_NAME.test(name) || !type) return c.json({ error: `no console asset ${name}` }, 404);
    const file = path.join(dir, 'assets', name);
    const gz = /\bgzip\b/.test(c.req.header('accept-encoding') ?? '') ? await readOrUndefined(`${file}.gz`) : undefined;
    const body = gz ?? (await readOrUndefined(file));
    if (!body) return c.json({ error: `no console asset ${name}` }, 404);
    // Names carry a content hash: a name never changes content, so it may be cached for good.
    c.header('Cache-Control', 'public, max-age=31536000, immutable');
    c.header('Content-Type', type);
    c.header('Vary', 'Accept-Encoding');
    if (gz) c.header('Content-Encoding', 'gzip');
    return c.body(new Uint8Array(body.buffer, body.byteOffset, body.byteLength));
  });
}
