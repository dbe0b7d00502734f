import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { startServer, ADMIN_KEY, type TestServer } from './helpers/server.ts';
import { buildConsole, launchChromium } from './helpers/chromium.ts';
import { sendJsonEvents, sendOtelLogs, sendOtelMetrics, sendOtelTraces } from './helpers/consoleData.ts';

/**
 * The web console in a real headless Chromium against a spawned server holding JSON logs, OTLP logs,
 * traces and metrics. One browser, one server; the steps run in order on one page, as a person
 * would click through. Screenshots go to test-output/screenshots (git-ignored).
 */
const READER_KEY = 'test-reader-key-0123456789';
const shots = path.resolve(import.meta.dirname, '../test-output/screenshots');

let server: TestServer;
let browser: Browser;
let page: Page;
const problems: string[] = [];
const cspViolations: string[] = [];
let traceIds: string[] = [];

const shot = (name: string) => page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: false });
const go = async (hash: string) => {
  await page.goto(`${server.url}/${hash}`);
};

beforeAll(async () => {
  buildConsole();
  await fs.mkdir(shots, { recursive: true });
  [server, browser] = await Promise.all([startServer({
      // A console page runs several queries at once with one key (rows, histogram, lists); the suite
      // runs this file beside others on 2 cores, where queries overlap longer than a person would see.
      env: { P_API_KEYS: `${ADMIN_KEY}:admin,${READER_KEY}:reader`, P_QUERY_CONCURRENCY: '6', P_QUERY_CONCURRENCY_PER_KEY: '6' },
    }), launchChromium()]);
  const put = (name: string, kind?: string) => server.request(`/api/v1/logstream/${name}`, { method: 'PUT', headers: kind ? { 'X-P-Log-Source': kind } : {} });
  await put('app');
  await put('scratch');
  await sendJsonEvents(server, 'app', Array.from({ length: 200 }, (_, i) => ({ level: i % 10 ? 'info' : 'error', msg: `event ${i}`, user: { id: i % 17, plan: i % 3 ? 'free' : 'pro' } })));
  await sendJsonEvents(server, 'scratch', [{ msg: 'to be deleted' }]);
  await sendOtelLogs(server, 'otel-logs', 1500, 14);
  traceIds = await sendOtelTraces(server, 'traces', 6);
  await sendOtelMetrics(server, 'metrics', 30);

  const context = await browser.newContext({ viewport: { width: 1440, height: 900 }, colorScheme: 'light' });
  page = await context.newPage();
  page.setDefaultTimeout(20_000);
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    // 4xx answers are expected (a bad key, a bad query, the capability probes); CSP reports come below.
    if (m.type() === 'error' && !/status of 4\d\d|Content Security Policy/.test(m.text())) problems.push(`console error: ${m.text()}`);
  });
  // Every CSP violation, with where it came from: code of ours (or a library's) breaking the policy fails the test.
  await page.exposeBinding('reportCspViolation', (_source, v: string) => cspViolations.push(v));
  await page.addInitScript(`document.addEventListener('securitypolicyviolation', (e) =>
    window.reportCspViolation(JSON.stringify({ directive: e.violatedDirective, file: e.sourceFile, line: e.lineNumber, sample: e.sample })))`);
  // Every request the page makes must go to the server itself.
  page.on('request', (r) => {
    if (!r.url().startsWith(server.url) && !r.url().startsWith('blob:') && !r.url().startsWith('data:')) problems.push(`request to ${r.url()}`);
  });
}, 900_000);

afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

describe('web console', () => {
  test('is served at / without a key, with a strict CSP and cache headers', async () => {
    const index = await fetch(`${server.url}/`);
    expect(index.status).toBe(200);
    expect(index.headers.get('cache-control')).toBe('no-cache');
    const csp = index.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    // The style nonce is fresh for every page.
    const nonce = /'nonce-([^']+)'/.exec(csp)?.[1];
    expect(nonce).toBeDefined();
    expect((await fetch(`${server.url}/`)).headers.get('content-security-policy')).not.toContain(nonce);
    const html = await index.text();
    const js = /src="(\/assets\/app-[A-Z0-9]+\.js)"/.exec(html)?.[1];
    expect(js).toBeDefined();
    const asset = await fetch(`${server.url}${js}`, { headers: { 'accept-encoding': 'gzip' } });
    expect(asset.status).toBe(200);
    expect(asset.headers.get('cache-control')).toContain('immutable');
    expect(asset.headers.get('content-type')).toContain('javascript');
    expect((await fetch(`${server.url}/assets/..%2Fpackage.json`)).status).toBe(404);
    expect((await fetch(`${server.url}/assets/.hidden.js`)).status).toBe(404);
    expect((await fetch(`${server.url}/assets/nope.js`)).status).toBe(404);
    // The API still needs a key.
    expect((await fetch(`${server.url}/api/v1/logstream`)).status).toBe(401);
  });

  test('signs in with a key and lists the datasets with their stats', async () => {
    await go('');
    await page.getByLabel('API key').fill('wrong-key');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByText('That key is not valid.').waitFor();
    await page.getByLabel('API key').fill(ADMIN_KEY);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByTestId('datasets-table').waitFor();
    for (const name of ['app', 'scratch', 'otel-logs', 'traces', 'metrics']) await page.getByTestId(`dataset-row-${name}`).waitFor();
    await expect.poll(() => page.getByTestId('dataset-row-app').getByTestId('event-count').textContent()).toBe('200');
    await expect.poll(() => page.getByTestId('dataset-row-otel-logs').getByTestId('event-count').textContent()).toBe('1,500');
    // The key stays out of the URL and out of localStorage.
    expect(page.url()).not.toContain(ADMIN_KEY);
    expect(await page.evaluate('JSON.stringify(localStorage)')).not.toContain(ADMIN_KEY);
    expect(await page.evaluate('sessionStorage.getItem("lakehouse.apiKey")')).toBe(ADMIN_KEY);
    await page.getByRole('link', { name: 'traces', exact: true }).click();
    await page.getByTestId('schema-table').getByText('span_trace_id').waitFor();
    await shot('datasets');
  });

  test('runs a query and shows rows and the hits-over-time histogram', async () => {
    await go('#/explore?dataset=otel-logs&from=15m&to=now');
    await expect.poll(() => page.getByTestId('row-count').textContent(), { timeout: 20_000 }).toMatch(/^1,000 rows · \d+ ms/);
    await page.getByTestId('histogram').locator('canvas').waitFor();
    await expect.poll(() => page.getByTestId('hit-count').textContent()).toBe('1,500');
    expect(await page.getByTestId('result-row').count()).toBeGreaterThan(5);
    await shot('explore');
    // A row opens to its JSON.
    await page.getByRole('button', { name: 'Open row 1', exact: true }).click();
    await page.getByTestId('row-json').getByText('severity_text').waitFor();
    await shot('explore-row-json');
    await page.getByRole('button', { name: 'Close row 1', exact: true }).click();

    // An error is shown as the API gives it, next to the SQL; Ctrl+Enter runs.
    await page.locator('.cm-content').click();
    await page.keyboard.press('ControlOrMeta+a');
    await page.keyboard.type('SELECT nope FROM "otel-logs"');
    await page.keyboard.press('ControlOrMeta+Enter');
    await expect.poll(() => page.getByTestId('query-error').textContent()).toMatch(/^400: .*nope/);
    await page.keyboard.press('ControlOrMeta+a');
    await page.keyboard.type('SELECT severity_text, count(*) AS n FROM "otel-logs" GROUP BY 1 ORDER BY 1');
    await page.keyboard.press('Escape');
    await page.keyboard.press('ControlOrMeta+Enter');
    await expect.poll(() => page.getByTestId('row-count').textContent()).toMatch(/^3 rows/);
    expect(page.url()).toContain('q=SELECT+severity_text');

    // 100,000 rows stream in; only the rows in view are in the page, and the last one can be reached.
    await page.keyboard.press('ControlOrMeta+a');
    await page.keyboard.type('SELECT i, i * 2 AS twice FROM range(100000) t(i)');
    await page.keyboard.press('Escape');
    await page.keyboard.press('ControlOrMeta+Enter');
    await expect.poll(() => page.getByTestId('row-count').textContent(), { timeout: 30_000 }).toMatch(/^100,000 rows · \d+ ms/);
    expect(await page.getByTestId('result-row').count()).toBeLessThan(100);
    await page.getByTestId('results-scroll').focus();
    await page.keyboard.press('End');
    await page.getByTestId('result-row').filter({ hasText: '199998' }).waitFor();
  });

  test('zooms the time range by dragging across the histogram', async () => {
    await go('#/explore?dataset=otel-logs&from=15m&to=now');
    await expect.poll(() => page.getByTestId('hit-count').textContent()).toBe('1,500');
    const over = page.getByTestId('histogram').locator('.u-over');
    const box = (await over.boundingBox())!;
    await page.mouse.move(box.x + box.width * 0.3, box.y + box.height / 2);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width * 0.5, box.y + box.height / 2, { steps: 8 });
    await page.mouse.up();
    await expect.poll(() => decodeURIComponent(page.url())).toMatch(/from=\d{4}-\d\d-\d\dT[\d:.]+Z&to=\d{4}-/);
    await expect.poll(async () => Number((await page.getByTestId('hit-count').textContent())?.replace(/,/g, ''))).toBeLessThan(1500);
    const zoomed = Number((await page.getByTestId('hit-count').textContent())?.replace(/,/g, ''));
    expect(zoomed).toBeGreaterThan(0);
  });

  test('opens a trace as a waterfall with attributes, events and links', async () => {
    await go('#/traces?dataset=traces&from=1h&to=now');
    await expect.poll(() => page.getByTestId('trace-link').count()).toBe(6);
    await page.getByTestId('trace-list').getByText('error').first().waitFor();
    await go(`#/traces?dataset=traces&from=1h&to=now&trace=${traceIds[0]}`);
    await expect.poll(() => page.getByTestId('wf-span').count()).toBe(5);
    await page.getByRole('button', { name: /^payment Charge/ }).click();
    const details = page.getByTestId('span-details');
    await details.getByText('payment.provider').waitFor();
    await details.getByText('exception', { exact: true }).waitFor();
    await details.getByText('5b8efff798038103d269b633813fc60c').waitFor();
    await page.screenshot({ path: path.join(shots, 'trace-waterfall.png'), fullPage: true });
  });

  test('draws a metric as lines, as a rate for a counter', async () => {
    await go('#/metrics?dataset=metrics&from=1h&to=now&metric=system.cpu.utilization&by=host');
    await page.getByTestId('metric-chart').locator('canvas').waitFor();
    await page.getByTestId('metric-chart').getByText('web-2').waitFor();
    await shot('metrics-gauge');
    await page.getByTestId('metric-select').selectOption('http.server.requests');
    await page.getByLabel('Group by').selectOption('route');
    await expect.poll(() => page.getByTestId('metric-desc').textContent()).toContain('rate per second by route');
    await page.getByTestId('metric-chart').getByText('/items').waitFor();
    await page.getByTestId('metric-chart').getByText('/checkout').waitFor();
    await page.getByTestId('metric-select').selectOption('http.server.duration');
    await expect.poll(() => page.getByTestId('metric-desc').textContent()).toContain('p90 by route');
    await page.getByTestId('metric-chart').getByText('/checkout').waitFor();
    expect(await page.getByTestId('metric-chart').getByText('/items').count()).toBe(0);
    await shot('metrics-histogram');
  });

  test('live tail shows an event sent while it runs; pause stops it', async () => {
    await go('#/tail?dataset=app');
    await page.getByTestId('tail-list').getByText('event 199').waitFor();
    const marker = `tail-marker-${Date.now()}`;
    await sendJsonEvents(server, 'app', [{ level: 'warn', msg: marker }]);
    await page.getByTestId('tail-list').getByText(marker).waitFor({ timeout: 15_000 });
    await page.getByTestId('tail-pause').click();
    await expect.poll(() => page.getByTestId('tail-pause').textContent()).toBe('Resume');
    await shot('tail');
  });

  test("saves a query, loads it back and deletes it (the API's saved filters)", async () => {
    const sql = 'SELECT level, count(*) AS n FROM app WHERE level IS NOT NULL GROUP BY level';
    // Asked before the page runs queries of its own with the same key (2 may run at once per key).
    const viaApi = (await (await server.request('/api/v1/query', { method: 'POST', json: { query: sql, startTime: '1h', endTime: 'now' } })).json()) as unknown[];
    expect(Array.isArray(viaApi)).toBe(true);
    await go(`#/explore?dataset=app&from=1h&to=now&q=${encodeURIComponent(sql)}`);
    const saved = page.getByTestId('saved-queries');
    // A <details> popover: open it unless a hash navigation kept it open.
    const openSaved = async () => {
      if (!(await saved.evaluate((d) => (d as HTMLDetailsElement).open))) await saved.locator('summary').click();
    };
    await openSaved();
    await page.getByPlaceholder('Name this query').fill('levels of app');
    await saved.getByRole('button', { name: 'Save', exact: true }).click();
    await saved.getByRole('button', { name: 'levels of app', exact: true }).waitFor();
    // It is the API's saved filter, visible to any client (and every worker).
    const filters = (await (await server.request('/api/v1/filters')).json()) as { filter_name: string; stream_name: string; query: { filter_query: string } }[];
    expect(filters).toContainEqual(expect.objectContaining({ filter_name: 'levels of app', stream_name: 'app', query: expect.objectContaining({ filter_query: sql }) }));
    // Loaded back from another query.
    await go(`#/explore?dataset=app&from=1h&to=now&q=${encodeURIComponent('SELECT 1 AS one')}`);
    await openSaved();
    await saved.getByRole('button', { name: 'levels of app', exact: true }).click();
    await expect.poll(() => decodeURIComponent(page.url().replaceAll('+', ' '))).toContain(sql);
    // The editor shows it; its rows, once the run it starts ends, are the API's. (Loading it changes the
    // query and the range, and each starts a run: the superseded one must not leave its "cancelled".)
    await expect.poll(() => page.locator('.cm-content').textContent()).toContain('GROUP BY level');
    await expect.poll(() => page.getByTestId('row-count').textContent()).toMatch(new RegExp(`^${viaApi.length} rows`));
    await shot('saved-queries');
    await openSaved();
    await saved.getByRole('button', { name: 'Delete saved query levels of app' }).click();
    await saved.getByText('None yet.').waitFor();
    expect(await (await server.request('/api/v1/filters')).json()).toEqual([]);
  });

  test('deletes a dataset after the name is typed', async () => {
    await go('#/datasets?dataset=scratch');
    await page.getByRole('button', { name: 'Delete scratch…' }).click();
    const confirm = page.getByRole('button', { name: 'Delete forever' });
    expect(await confirm.isDisabled()).toBe(true);
    await page.getByLabel('Type scratch to confirm').fill('scratch');
    await confirm.click();
    await expect.poll(() => page.getByTestId('dataset-row-scratch').count()).toBe(0);
    expect((await server.request('/api/v1/logstream/scratch/schema')).status).toBe(404);
  });

  test('a reader key is not offered what it may not do', async () => {
    await page.getByTestId('sign-out').click();
    await page.getByLabel('API key').fill(READER_KEY);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByTestId('dataset-row-app').waitFor();
    await go('#/datasets?dataset=app');
    await page.getByTestId('schema-table').waitFor();
    await page.getByTestId('retention-current').waitFor();
    expect(await page.getByRole('button', { name: '+ New dataset' }).count()).toBe(0);
    expect(await page.getByRole('button', { name: /^Delete/ }).count()).toBe(0);
    expect(await page.getByRole('form', { name: 'Retention' }).count()).toBe(0);
  });

  test('works at phone width in the dark theme', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.getByRole('button', { name: /Switch to dark theme/ }).click();
    await go('#/explore?dataset=app&from=1h&to=now');
    await expect.poll(() => page.getByTestId('row-count').textContent()).toMatch(/^201 rows/);
    expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    await shot('explore-phone-dark');
    expect(problems).toEqual([]);
    // The only tolerated violation: Chromium's own editing code (no script file) giving a style
    // attribute to text typed over a multi-line selection in CodeMirror's contenteditable; blocked,
    // harmlessly, as CodeMirror redraws the lines from its state.
    for (const v of cspViolations.map((x) => JSON.parse(x) as { directive: string; file: string })) {
      expect(v).toMatchObject({ directive: 'style-src-attr', file: '' });
    }
  });
});
