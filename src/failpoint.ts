/**
 * Crash points for the crash tests: with `P_FAILPOINT=<name>` the process kills itself (SIGKILL, as
 * a power cut would) when it reaches `<name>`, between two steps whose order durability depends on.
 */
export function failpoint(name: string): void {
  if (process.env.P_FAILPOINT === name) process.kill(process.pid, 'SIGKILL');
}
