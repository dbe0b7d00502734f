import { rng } from './lib.ts';

const services = ['checkout', 'cart', 'auth', 'search', 'payments', 'inventory', 'shipping', 'frontend'];
const paths = ['/api/cart', '/api/checkout', '/api/login', '/api/search', '/api/items/:id', '/api/orders', '/healthz', '/api/pay'];
const methods = ['GET', 'GET', 'GET', 'POST', 'PUT', 'DELETE'];
const levels = ['info', 'info', 'info', 'info', 'debug', 'warn', 'error'];
const messages = [
  'request completed',
  'cache miss for key',
  'upstream timeout after retries',
  'user authenticated',
  'payment declined by issuer',
  'slow query detected',
  'connection reset by peer',
];

/** Log events shaped like a typical HTTP service's structured logs (~400 bytes of JSON each). */
export function makeLogEvents(count: number, seed: number): Record<string, unknown>[] {
  const r = rng(seed);
  const pick = <T>(xs: T[]) => xs[Math.floor(r() * xs.length)];
  const out: Record<string, unknown>[] = [];
  const base = Date.parse('2026-11-01T00:00:00Z');
  for (let i = 0; i < count; i++) {
    const status = r() < 0.9 ? 200 : pick([201, 204, 301, 400, 401, 404, 500, 502, 503]);
    out.push({
      time: new Date(base + i * 37).toISOString(),
      level: status >= 500 ? 'error' : pick(levels),
      service: pick(services),
      host: `ip-10-0-${Math.floor(r() * 16)}-${Math.floor(r() * 256)}`,
      message: pick(messages),
      http: { method: pick(methods), path: pick(paths), status, latency_ms: Math.round(r() * r() * 2000 * 100) / 100, bytes: Math.floor(r() * 50_000) },
      user: { id: `u-${Math.floor(r() * 50_000)}`, country: pick(['US', 'DE', 'IN', 'BR', 'JP', 'FR']) },
      trace_id: Math.floor(r() * 2 ** 52).toString(16).padStart(16, '0') + Math.floor(r() * 2 ** 52).toString(16).padStart(16, '0'),
      span_id: Math.floor(r() * 2 ** 52).toString(16).padStart(16, '0'),
      retry: r() < 0.05,
    });
  }
  return out;
}
