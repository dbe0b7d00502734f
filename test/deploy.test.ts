import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

/**
 * No Docker engine runs here, so the documented deployment is checked as files: the compose file
 * parses, names images that exist where it says, gives every worker what it needs and a health check
 * a probe can pass, and the load balancer survives a worker name that does not resolve and passes
 * `nginx -t` on Debian's nginx.
 */
const root = path.resolve(import.meta.dirname, '..');

interface Service {
  image?: string;
  build?: unknown;
  restart?: string;
  environment?: Record<string, string>;
  healthcheck?: { test: string[] | string };
  depends_on?: Record<string, { condition: string }> | string[];
  volumes?: string[];
}

describe('docker-compose.yml', () => {
  it('uses MinIO images from quay.io, a supported Node base image, and gives each worker the settings it needs', async () => {
    const compose = parse(await fs.readFile(path.join(root, 'docker-compose.yml'), 'utf8'), { merge: true }) as { services: Record<string, Service> };
    const { services } = compose;
    expect(services.minio.image).toMatch(/^quay\.io\/minio\/minio(:|$)/);
    expect(services['minio-init'].image).toMatch(/^quay\.io\/minio\/mc(:|$)/);
    const dockerfile = await fs.readFile(path.join(root, 'Dockerfile'), 'utf8');
    const from = /^FROM\s+node:(\d+)/m.exec(dockerfile);
    expect(from, 'Dockerfile FROM node:<major>').not.toBeNull();
    expect([22, 24]).toContain(Number(from![1]));

    const workers = Object.entries(services).filter(([name]) => name.startsWith('worker-'));
    expect(workers.length).toBeGreaterThanOrEqual(2);
    const keys = new Set<string>();
    const ids = new Set<string>();
    for (const [name, w] of workers) {
      const env = w.environment ?? {};
      expect(env.P_STORAGE, name).toBe('s3');
      expect(env.P_S3_URL, name).toBe('http://minio:9000');
      expect(env.P_S3_BUCKET, name).toBeTruthy();
      expect(env.P_API_KEYS, name).toBeTruthy();
      keys.add(env.P_API_KEYS);
      ids.add(env.P_NODE_ID);
      expect(w.restart, name).toBe('unless-stopped');
      // The health check is readiness, without a key (probes send none).
      const test = ([] as string[]).concat(w.healthcheck?.test ?? []).join(' ');
      expect(test, name).toContain('/api/v1/readiness');
      expect(test.toLowerCase(), name).not.toMatch(/x-api-key|authorization/);
      expect(w.volumes?.length, name).toBeGreaterThan(0);
    }
    expect(keys.size, 'every worker needs the same keys').toBe(1);
    expect(ids.size, 'every worker needs its own P_NODE_ID').toBe(workers.length);

    const lb = services.lb;
    expect(lb.restart).toBe('unless-stopped');
    for (const [name] of workers) expect((lb.depends_on as Record<string, { condition: string }>)[name]?.condition).toBe('service_healthy');
    expect(services.minio.healthcheck).toBeDefined();
  });

  it("nginx resolves the workers' shared name at request time, so it starts when none resolves", async () => {
    const conf = await fs.readFile(path.join(root, 'minio/nginx.conf'), 'utf8');
    expect(conf).toMatch(/^\s*resolver\s+127\.0\.0\.11\b/m);
    // A variable in proxy_pass: resolved per request through the resolver, never at start-up.
    const target = /^\s*set\s+\$(\w+)\s+(\S+);/m.exec(conf);
    expect(target, 'the workers\' name in a variable').not.toBeNull();
    expect(conf).toMatch(new RegExp(`proxy_pass\\s+http://\\$${target![1]}:8000;`));
    const compose = parse(await fs.readFile(path.join(root, 'docker-compose.yml'), 'utf8'), { merge: true }) as { services: Record<string, { networks?: { default?: { aliases?: string[] } } }> };
    const workers = Object.entries(compose.services).filter(([name]) => /^worker-\d+$/.test(name));
    expect(workers.length).toBeGreaterThanOrEqual(2);
    for (const [name, w] of workers) expect(w.networks?.default?.aliases, name).toContain(target![2]);
  });

  it("the nginx configuration passes `nginx -t` on Debian's nginx (1.22)", async () => {
    // Installed by scripts/test-setup.d/50-nginx.sh; its absence is a failure, not a skip.
    const nginx = ['/usr/sbin/nginx', '/usr/bin/nginx'].find((p) => existsSync(p));
    expect(nginx, 'nginx is not installed: run scripts/test-setup.sh').toBeDefined();
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'nginx-t-'));
    try {
      // The compose file mounts it as a conf.d file: include it in the http block of a minimal main file.
      await fs.writeFile(
        path.join(dir, 'nginx.conf'),
        [
          `pid ${dir}/nginx.pid;`,
          `error_log ${dir}/error.log;`,
          'events {}',
          `http { ${['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((t) => `${t}_temp_path ${dir}/${t};`).join(' ')} include ${path.join(root, 'minio/nginx.conf')}; }`,
        ].join('\n'),
      );
      const out = spawnSync(nginx!, ['-t', '-p', `${dir}/`, '-c', path.join(dir, 'nginx.conf')], { encoding: 'utf8' });
      expect(out.status, out.stderr).toBe(0);
      expect(out.stderr).toMatch(/test is successful/);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});
