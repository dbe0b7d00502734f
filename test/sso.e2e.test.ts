import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { startServer, type TestServer } from './helpers/server.ts';
import { buildConsole, launchChromium } from './helpers/chromium.ts';
import { startOidcProvider, type TestProvider } from './helpers/oidcProvider.ts';
import { sendJsonEvents } from './helpers/consoleData.ts';

/**
 * Single sign-on end to end: the real service, a real OpenID provider (oidc-provider, in this process) and
 * headless Chromium clicking through it as a person would: the console's sign-in button, the provider's
 * login and consent forms, back to the console signed in, who is shown, what a reader's role hides, and
 * sign-out. The attacks (state, nonce, replayed code, other origins) are test/ssoFlow.test.ts.
 */
let provider: TestProvider;
let server: TestServer;
let browser: Browser;
const problems: string[] = [];

beforeAll(async () => {
  buildConsole();
  provider = await startOidcProvider({ alice: ['lakehouse-admins'], rita: ['lakehouse-readers'], carl: ['vendors'] });
  [server, browser] = await Promise.all([
    startServer({
      env: {
        P_OIDC_ISSUER: provider.issuer,
        P_OIDC_CLIENT_ID: provider.clientId,
        P_OIDC_CLIENT_SECRET: provider.clientSecret,
        P_OIDC_SCOPE: 'openid email groups',
        P_OIDC_ROLE_MAP: 'lakehouse-admins=admin,lakehouse-readers=reader,vendors=contractor',
      },
    }),
    launchChromium(),
  ]);
  // The redirect URI is only known once the service has its port (no P_ORIGIN_URI: the request's own origin).
  provider.register([`${server.url}/api/v1/o/code`]);
  await server.request('/api/v1/logstream/app', { method: 'PUT' });
  await sendJsonEvents(server, 'app', [{ level: 'info', msg: 'hello' }]);
  await server.request('/api/v1/logstream/web', { method: 'PUT' });
  // A role of the user and role store (Parseable's body): read on one dataset.
  const role = await server.request('/api/v1/role/contractor', { method: 'PUT', json: [{ privilege: 'reader', resource: { stream: 'app' } }] });
  expect(role.status).toBe(200);
}, 300_000);

afterAll(async () => {
  await browser?.close();
  await server?.stop();
  await provider?.close();
});

async function newPage(): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  page.setDefaultTimeout(20_000);
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  return { context, page };
}

/** From the console's sign-in page through the provider's forms, back to the console. */
async function signInAs(page: Page, login: string): Promise<void> {
  await page.goto(`${server.url}/#/datasets?dataset=app`);
  await page.getByTestId('sso-sign-in').click();
  await page.waitForURL(`${provider.issuer}/**`);
  await page.locator('input[name="login"]').fill(login);
  await page.locator('input[name="password"]').fill('any password');
  await page.getByRole('button', { name: 'Sign-in' }).click();
  await page.getByRole('button', { name: 'Continue' }).click();
  await page.waitForURL(`${server.url}/#/datasets?dataset=app`);
}

describe('single sign-on in Chromium', () => {
  test('a group mapped to a stored role gets that role\'s datasets, and loses them when the role goes', async () => {
    const { context, page } = await newPage();
    await signInAs(page, 'carl');
    await expect.poll(() => page.getByTestId('whoami').textContent()).toBe('carl@example.com · contractor');
    const who = () => page.evaluate(async () => (await fetch('/api/v1/whoami')).json() as Promise<{ actions: string[]; datasets: string[] | null }>);
    expect(await who()).toMatchObject({ actions: ['read'], datasets: ['app'] });
    await page.getByTestId('dataset-row-app').waitFor();
    expect(await page.getByTestId('dataset-row-web').count()).toBe(0);
    const status = (path: string) => page.evaluate(async (p) => (await fetch(p)).status, path);
    expect(await status('/api/v1/logstream/web/schema')).toBe(403);
    // The admin deletes the role: the open session holds nothing any more, without signing in again.
    expect((await server.request('/api/v1/role/contractor', { method: 'DELETE' })).status).toBe(200);
    await expect.poll(async () => (await who()).actions).toEqual([]);
    expect(await status('/api/v1/logstream/app/schema')).toBe(403);
    await context.close();
  });

  test('a reader signs in through the provider, sees who they are, no write controls, and signs out', async () => {
    const { context, page } = await newPage();
    await signInAs(page, 'rita');
    await expect.poll(() => page.getByTestId('whoami').textContent()).toBe('rita@example.com · reader');
    await page.getByTestId('dataset-row-app').waitFor();
    await page.getByTestId('dataset-panel').waitFor();
    await page.getByTestId('schema-table').waitFor();
    // A reader: no new dataset, no retention change, no delete.
    expect(await page.getByRole('button', { name: '+ New dataset' }).count()).toBe(0);
    expect(await page.getByRole('button', { name: 'Delete app…' }).count()).toBe(0);
    // The session is an HttpOnly, SameSite=Lax cookie for this host; the page's script cannot read it.
    const cookies = await context.cookies(server.url);
    const session = cookies.find((c) => c.name === 'session');
    expect(session).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/' });
    expect(await page.evaluate(() => document.cookie)).not.toContain('session=');
    // Reads with the cookie work; so do queries (a POST from this origin).
    const counted = await page.evaluate(async () => {
      const res = await fetch('/api/v1/query', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: 'SELECT count(*) AS n FROM app', startTime: '1h', endTime: 'now' }) });
      return [res.status, await res.json()] as const;
    });
    expect(counted).toEqual([200, [{ n: 1 }]]);

    await page.getByTestId('sign-out').click();
    await page.getByLabel('API key').waitFor();
    expect((await context.cookies(server.url)).some((c) => c.name === 'session')).toBe(false);
    // The session is gone on the server too: the old cookie is refused.
    const old = await fetch(`${server.url}/api/v1/whoami`, { headers: { cookie: `session=${session!.value}` } });
    expect(old.status).toBe(401);
    await context.close();
  });

  test('an admin signs in and has the write controls', async () => {
    const { context, page } = await newPage();
    await signInAs(page, 'alice');
    await expect.poll(() => page.getByTestId('whoami').textContent()).toBe('alice@example.com · admin');
    await page.getByTestId('dataset-panel').waitFor();
    await page.getByRole('button', { name: '+ New dataset' }).waitFor();
    await page.getByRole('button', { name: 'Delete app…' }).waitFor();
    // A reload keeps the session (the cookie, not the tab's storage).
    await page.reload();
    await expect.poll(() => page.getByTestId('whoami').textContent()).toBe('alice@example.com · admin');
    await context.close();
    expect(problems).toEqual([]);
  });
});
