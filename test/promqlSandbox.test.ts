/**
 * The PromQL engine's seccomp filter is an allow list (A13): the Go test in promql/sandbox_linux_test.go
 * loads the engine's own filter in a child process and makes system calls the engine never needs
 * (io_uring_setup, pidfd_open, pidfd_getfd, kill, ptrace, bpf, a fork-style clone, …); each must fail
 * with EPERM. The engine also proves part of this at every start (promql/sandbox_linux.go
 * proveSandbox), so every PromQL system test checks it again.
 */
import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';
import { goBinary } from '../scripts/build-promql.ts';

const run = promisify(execFile);

it('the engine sandbox refuses every system call it does not allow (go test)', async () => {
  // The suite needs Go (the global setup builds the engine with it): none here is a failure, not a skip.
  const go = goBinary();
  if (!go) throw new Error('Go is needed for this test (see test/README.md)');
  const { stdout } = await run(go, ['test', '-count=1', '-run', '^TestSandboxIsAnAllowList$', '-v', '.'], {
    cwd: path.join(import.meta.dirname, '..', 'promql'),
    env: { ...process.env, CGO_ENABLED: '0' },
  });
  expect(stdout).toMatch(/--- PASS: TestSandboxIsAnAllowList/);
}, 180_000);
