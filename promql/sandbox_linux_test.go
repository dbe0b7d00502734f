package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// childEnv marks the process that loads the filter: the test runs itself again, so the filter never
// binds the test runner.
const childEnv = "PROMQL_SANDBOX_PROBE"

// probes are system calls the engine never needs, each made with harmless arguments once the filter is
// loaded: every one must fail with EPERM, the filter's answer (an allow list refuses what it does not
// name; the former deny list let io_uring, pidfd_getfd, kill and a fork-style clone through).
func probes(parent int) map[string]syscall.Errno {
	errnoOf := func(trap uintptr, a ...uintptr) syscall.Errno {
		args := append(a, 0, 0, 0)
		_, _, e := syscall.RawSyscall(trap, args[0], args[1], args[2])
		return e
	}
	out := map[string]syscall.Errno{
		"io_uring_setup": errnoOf(425, 0, 0),
		"pidfd_open":     errnoOf(434, uintptr(parent), 0),
		"pidfd_getfd":    errnoOf(438, 0, 0, 0),
		"kill":           errnoOf(syscall.SYS_KILL, uintptr(parent), 0),
		"ptrace":         errnoOf(syscall.SYS_PTRACE, syscall.PTRACE_TRACEME, 0),
		"getppid":        errnoOf(syscall.SYS_GETPPID),
		"uname":          errnoOf(syscall.SYS_UNAME, 0),
		"bpf":            errnoOf(321, 0, 0, 0),
	}
	// A fork-style clone: refused; were it not, the child leaves at once.
	r, _, e := syscall.RawSyscall(syscall.SYS_CLONE, uintptr(syscall.SIGCHLD), 0, 0)
	if e == 0 && r == 0 {
		syscall.RawSyscall(syscall.SYS_EXIT_GROUP, 0, 0, 0)
	}
	out["clone (a process)"] = e
	return out
}

func TestSandboxIsAnAllowList(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		parent := syscall.Getppid()
		if err := sandbox(); err != nil {
			os.Stdout.WriteString(`{"sandbox":"` + err.Error() + `"}`)
			os.Exit(2)
		}
		answers := map[string]string{}
		for name, e := range probes(parent) {
			answers[name] = e.Error()
			if e == 0 {
				answers[name] = "allowed"
			}
		}
		b, _ := json.Marshal(answers)
		os.Stdout.Write(b)
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSandboxIsAnAllowList$")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the sandboxed child failed: %v: %s", err, out)
	}
	var answers map[string]string
	if err := json.Unmarshal(out, &answers); err != nil {
		t.Fatalf("the child's answer %q: %v", out, err)
	}
	if len(answers) < 9 {
		t.Fatalf("only %d probes answered: %v", len(answers), answers)
	}
	for name, answer := range answers {
		if answer != syscall.EPERM.Error() {
			t.Errorf("%s: %s, want %s", name, answer, syscall.EPERM.Error())
		}
	}
}
