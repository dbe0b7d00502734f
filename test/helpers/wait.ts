/** Resolves after `ms`. For pacing a load or letting time pass on purpose; to wait for a condition, use waitFor. */
export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Polls `fn` every 100 ms until it returns something truthy and returns that; fails naming `what` (and the
 * last error `fn` threw) after `timeoutMs`. The deadline is generous on purpose: on a loaded 2-core
 * machine a flush or a refresh can take many times its usual time, and a test must not fail for that.
 */
export async function waitFor<T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${(last as Error).message}` : ''}`);
    await sleep(100);
  }
}
