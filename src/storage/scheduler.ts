import { log } from '../log.ts';

/**
 * The storage engine's background timers in one place: each task runs every `ms`, never overlapping
 * itself (a slow compaction is not started twice), a failure is logged with the task's name and the
 * task runs again at its next tick. Timers are unref'd so they never keep the process alive.
 */
export class Scheduler {
  private timers: NodeJS.Timeout[] = [];

  every(name: string, ms: number, task: () => Promise<unknown> | void): void {
    let running = false;
    const timer = setInterval(async () => {
      if (running) return;
      running = true;
      try {
        await task();
      } catch (err) {
        log.warn('background task failed; will run again', { task: name, error: (err as Error).message });
      } finally {
        running = false;
      }
    }, ms);
    timer.unref();
    this.timers.push(timer);
  }

  /** Stops every timer; a task already running finishes on its own. */
  stop(): void {
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
  }
}
