import { describe, expect, it, vi } from 'vitest';
import { Components, type Component } from '../../src/component.ts';
import { log } from '../../src/log.ts';

// main's lifecycle (src/component.ts) over fake components that record what happens to them: started in
// order, stopped in reverse, and on a failing start the ones started before it stopped.

function fakes(names: string[], failStart?: string, failStop?: string): { components: Component[]; events: string[] } {
  const events: string[] = [];
  const components = names.map((name) => ({
    name,
    start: async () => {
      await Promise.resolve(); // a start that takes a turn: the next must wait for it
      if (name === failStart) throw new Error(`${name} failed`);
      events.push(`start ${name}`);
    },
    gauges: () => void events.push(`gauges ${name}`),
    stop: () => {
      events.push(`stop ${name}`);
      if (name === failStop) throw new Error(`${name} stop failed`);
    },
  }));
  return { components, events };
}

async function startEach(parts: Components, components: Component[]): Promise<void> {
  for (const c of components) expect(await parts.start(c)).toBe(c);
}

describe('Components', () => {
  it.each([
    { names: ['storage', 'ingest', 'queries', 'http'], failStop: undefined },
    { names: ['only'], failStop: undefined },
    { names: [], failStop: undefined },
    { names: ['storage', 'queries', 'http'], failStop: 'queries' },
  ])('starts $names in order and stops them in reverse (failing stop: $failStop)', async ({ names, failStop }) => {
    const { components, events } = fakes(names, undefined, failStop);
    const parts = new Components();
    const logged = vi.spyOn(log, 'error').mockImplementation(() => undefined);
    await startEach(parts, components);
    expect(events).toEqual(names.flatMap((n) => [`start ${n}`, `gauges ${n}`]));
    events.length = 0;
    await parts.stop();
    expect(events).toEqual([...names].reverse().map((n) => `stop ${n}`));
    expect(logged.mock.calls.map(([msg, fields]) => [msg, (fields as { component: string }).component])).toEqual(failStop ? [['stopping a component failed', failStop]] : []);
    logged.mockRestore();
    events.length = 0;
    await parts.stop(); // a second stop stops nothing again
    expect(events).toEqual([]);
  });

  it.each([
    { names: ['storage', 'ingest', 'queries', 'http'], failing: 'queries' },
    { names: ['storage', 'ingest', 'queries', 'http'], failing: 'storage' },
    { names: ['storage', 'ingest', 'queries', 'http'], failing: 'http' },
  ])('when $failing fails to start, the ones before it stop in reverse and the error is thrown', async ({ names, failing }) => {
    const { components, events } = fakes(names, failing);
    const parts = new Components();
    await expect(startEach(parts, components)).rejects.toThrow(`${failing} failed`);
    const before = names.slice(0, names.indexOf(failing));
    expect(events).toEqual([...before.flatMap((n) => [`start ${n}`, `gauges ${n}`]), ...[...before].reverse().map((n) => `stop ${n}`)]);
  });
});
