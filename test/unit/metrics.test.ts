import { describe, expect, it } from 'vitest';
import { registry } from '../../src/metrics.ts';

describe('metrics', () => {
  it("Node's process metrics are named lakehouse_process_* and lakehouse_nodejs_*, never doubled", async () => {
    const names = (await registry.getMetricsAsJSON()).map((m) => m.name);
    expect(names).toContain('lakehouse_process_cpu_seconds_total');
    expect(names).toContain('lakehouse_nodejs_eventloop_lag_seconds');
    expect(names.filter((n) => /process_process|nodejs_nodejs/.test(n))).toEqual([]);
    expect(names.filter((n) => !n.startsWith('lakehouse_'))).toEqual([]);
  });
});
