import { DomainError, timedOut } from '../../errors.ts';

/** What a running job offers to stop it (QueryPool.run's answer). */
export interface Cancellable {
  cancel: (reason: DomainError) => void;
}

export interface Limits {
  /** Time left for the job, ms (the statement's time limit less what preparing it took). */
  timeoutMs: number;
  /** The time limit's message, naming the setting. */
  timeoutMessage: string;
  /** The caller's signal: a client gone or a cancel request stops the job. */
  signal?: AbortSignal;
  /** What a job stopped by the signal answers (each door words its own cancel). */
  cancelled?: DomainError;
}

/**
 * Holds a job started on a query worker to its time limit and to its caller's abort signal, the same way
 * for SQL, PromQL and the PostgreSQL catalog. Returns the function that ends the hold (call it once the
 * job's answer is read or abandoned).
 */
export function holdToLimits(exec: Cancellable, limits: Limits): () => void {
  const timer = setTimeout(() => exec.cancel(timedOut(limits.timeoutMessage)), Math.max(0, limits.timeoutMs));
  // Made when needed: an Error (its stack) per query cost ~25 µs of every dashboard panel.
  const onAbort = () => exec.cancel(limits.cancelled ?? new DomainError('cancelled', 'the client closed the connection'));
  limits.signal?.addEventListener('abort', onAbort);
  // Aborted while waiting for a worker: the event has passed, stop now.
  if (limits.signal?.aborted) onAbort();
  return () => {
    clearTimeout(timer);
    limits.signal?.removeEventListener('abort', onAbort);
  };
}

/** The time limit's message of SQL and PromQL statements. */
export const timeLimitMessage = (timeoutMs: number) => `query exceeded the time limit of ${timeoutMs} ms (P_QUERY_TIMEOUT)`;
