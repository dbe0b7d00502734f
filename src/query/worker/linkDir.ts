import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { DomainError } from '../../errors.ts';

/** A file a job may read: the name it has in the worker's directory, and the file it is a link to. */
export interface Link {
  name: string;
  src: string;
}

/** A file set a worker holds: its id, dataset and links. */
export type HeldSet = readonly [number, { dataset: string; links: readonly Link[] }];

/**
 * A query worker's directory of links: the only files its DuckDB may open (worker.ts). It is this
 * worker's alone, and empty when the worker starts.
 *
 * An SQL job's directory holds exactly its links. A PromQL job's also keeps the links of the other file
 * sets of the same dataset the worker holds (grantSets.ts `HeldSets`): files the job's principal may
 * read (access is granted per dataset), over which its DuckDB runs only the service's own SQL, and a
 * dashboard's panels alternate between a few ranges — a `[10m]` or an
 * `offset 30m` panel's set differs from the `[5m]` panels' by tens of minute files, which were unlinked
 * and linked again on every switch, 2–3 ms a panel (docs/performance.md). The next SQL job removes them;
 * a set no longer held loses its links at the next PromQL job. Links kept cost nothing: the same name
 * always means the same immutable file.
 */
export class LinkDir {
  private readonly linked = new Set<string>();
  /** PromQL file sets whose links the directory holds, all of them. */
  private readonly complete = new Set<number>();

  constructor(private readonly dir: string) {}

  /** The names linked now (for the tests). */
  names(): string[] {
    return [...this.linked].sort();
  }

  /**
   * Makes the directory hold `links` (stale ones go first, then the new ones are made, concurrently).
   * `promql`: the job's file set id and dataset, and the sets the worker holds (the job's among them):
   * those of the same dataset keep their links.
   */
  async sync(links: readonly Link[], promql?: { setId: number; dataset: string; held: readonly HeldSet[] }): Promise<void> {
    // The directory holds this PromQL file set's links already (a dashboard's panels, one after the other).
    if (promql && this.complete.has(promql.setId)) return;
    const held = (promql?.held ?? []).filter(([, set]) => set.dataset === promql?.dataset);
    for (const id of this.complete) if (!held.some(([h]) => h === id)) this.complete.delete(id);
    const keep = new Set(links.map((l) => l.name));
    for (const [, set] of held) for (const l of set.links) keep.add(l.name);
    const stale = [...this.linked].filter((name) => !keep.has(name));
    await Promise.all(
      stale.map(async (name) => {
        await fs.rm(path.join(this.dir, name), { force: true });
        this.linked.delete(name);
      }),
    );
    await Promise.all(links.filter((l) => !this.linked.has(l.name)).map((l) => this.link(l)));
    if (promql) this.complete.add(promql.setId);
  }

  private async link({ name, src }: Link): Promise<void> {
    const target = path.join(this.dir, name);
    try {
      await fs.link(src, target);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EXDEV') await fs.symlink(src, target); // data on another file system
      else if (code === 'ENOENT') throw new DomainError('not_found', 'a file of the dataset is gone (deleted or compacted meanwhile); retry the query');
      else if (code !== 'EEXIST') throw err;
    }
    this.linked.add(name);
  }
}
