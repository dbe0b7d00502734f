import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { z } from 'zod';

/**
 * What one part of a service costs, from the V8 CPU profile node's `--cpu-prof` writes of its main
 * thread: the sampled time of stacks with a frame of that part's code (by script URL), against all
 * sampled time that is not idle. Measured inside one process over the same minutes, it does not move
 * with the machine's other load the way two services' CPU counters do (a sample is time the thread
 * was on its stack; a preempted thread's slice counts for the frame it was in, like every other one).
 */

const ProfileZ = z.object({
  nodes: z.array(z.object({ id: z.number(), callFrame: z.object({ functionName: z.string(), url: z.string(), lineNumber: z.number() }), children: z.array(z.number()).optional() })),
  samples: z.array(z.number()),
  timeDeltas: z.array(z.number()),
});

export interface PartCost {
  /** Sampled seconds not idle (JS, GC, native: the main thread's work). */
  busySec: number;
  /** Sampled seconds with a frame of the part's code on the stack. */
  partSec: number;
  /** The part's busiest functions (function file:line, seconds): each sample charged to the innermost frame of the part's code. */
  top: [string, number][];
}

/** The profile(s) of the main thread of process `pid` in `dir` (`CPU.<date>.<pid>.0.<seq>.cpuprofile`). */
export async function mainThreadProfiles(dir: string, pid: number): Promise<string[]> {
  const names = await fs.readdir(dir);
  return names.filter((n) => new RegExp(`^CPU\\.[\\d.]+?\\.${pid}\\.0\\.\\d+\\.cpuprofile$`).test(n)).map((n) => path.join(dir, n));
}

/** The cost of the code whose script URL contains `urlPart` (e.g. `/storage/iceberg/`). */
export async function partCost(file: string, urlPart: string): Promise<PartCost> {
  const profile = ProfileZ.parse(JSON.parse(await fs.readFile(file, 'utf8')));
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const inPart = new Map<number, boolean>();
  const isInPart = (id: number): boolean => {
    let known = inPart.get(id);
    if (known === undefined) {
      const p = parent.get(id);
      known = byId.get(id)!.callFrame.url.includes(urlPart) || (p !== undefined && isInPart(p));
      inPart.set(id, known);
    }
    return known;
  };
  let busy = 0;
  let part = 0;
  const self = new Map<string, number>();
  profile.samples.forEach((id, i) => {
    const frame = byId.get(id)!.callFrame;
    // The delta before a sample is the time its stack ran (µs).
    const sec = (profile.timeDeltas[i] ?? 0) / 1e6;
    if (frame.functionName === '(idle)') return;
    busy += sec;
    if (!isInPart(id)) return;
    part += sec;
    // Charged to the innermost function of the part's own code on the stack (with what it called).
    let at = id;
    while (!byId.get(at)!.callFrame.url.includes(urlPart)) at = parent.get(at)!;
    const own = byId.get(at)!.callFrame;
    const where = `${own.functionName || '(anonymous)'} ${path.basename(own.url)}:${own.lineNumber + 1}`;
    self.set(where, (self.get(where) ?? 0) + sec);
  });
  const top = [...self].sort((a, b) => b[1] - a[1]).slice(0, 8);
  return { busySec: busy, partSec: part, top };
}
