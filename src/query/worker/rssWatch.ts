import { readFileSync } from 'node:fs';
import type { ChildProcess } from 'node:child_process';
import { log } from '../../log.ts';

/*
 * The query pool's RSS watchdog (pool.ts): where a worker has no memory cgroup of its own, its resident
 * memory and its PromQL engine's are read every RSS_WATCH_MS and the worker is killed past its cap.
 */

/** What the watchdog reads of a pool slot. */
export interface Watched {
  id: number;
  child: ChildProcess;
  /** Its PromQL engine process, once it started one. */
  enginePid?: number;
}

/** How often a busy worker's resident memory is read (one small /proc read). */
const RSS_WATCH_MS = 50;

/** Resident bytes of a process (Linux /proc), or undefined. */
function residentBytes(pid: number | undefined): number | undefined {
  if (!pid) return undefined;
  try {
    const pages = Number(readFileSync(`/proc/${pid}/statm`, 'latin1').split(' ')[1]);
    return pages * PAGE_BYTES;
  } catch {
    return undefined;
  }
}
const PAGE_BYTES = 4096;

/**
 * Resident bytes of a worker and of its PromQL engine process: the engine is counted only while it is
 * still that worker's child (its process id could be another process's once it ended).
 */
function workerResidentBytes(slot: Watched): number | undefined {
  const own = residentBytes(slot.child.pid);
  if (own === undefined || !slot.enginePid) return own;
  try {
    const stat = readFileSync(`/proc/${slot.enginePid}/stat`, 'latin1');
    const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (parent !== slot.child.pid) return own;
  } catch {
    return own;
  }
  return own + (residentBytes(slot.enginePid) ?? 0);
}

/** Kills the slot's worker once it is over `cap` (unless its job has `finished`), calling `onOver` first. */
export function watchMemory(slot: Watched, cap: number, finished: () => boolean, onOver: () => void): NodeJS.Timeout {
  const timer = setInterval(() => {
    const rss = workerResidentBytes(slot);
    if (rss === undefined || rss <= cap || finished()) return;
    log.warn('query worker over its memory cap; killed', { worker: slot.id, rssBytes: rss, capBytes: cap });
    onOver();
    slot.child.kill('SIGKILL');
  }, RSS_WATCH_MS);
  timer.unref();
  return timer;
}
