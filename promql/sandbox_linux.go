package main

import (
	"errors"
	"fmt"
	"syscall"

	seccomp "github.com/elastic/go-seccomp-bpf"
)

// allowed are the only system calls the engine makes once it runs (measured with strace over the PromQL
// system tests, plus what the Go runtime may need later: munmap after a GC, exit for a locked thread,
// clock_* without the vDSO): it reads requests from stdin and writes answers to stdout, allocates memory,
// and schedules goroutines on threads. Everything else fails with EPERM, so the engine cannot reach a
// file, the network, another process or the kernel's wider surface (io_uring, pidfd_getfd, bpf, …).
var allowed = []string{
	// the pipes it was started with
	"read", "write", "close",
	// memory
	"mmap", "munmap", "madvise",
	// threads and their scheduling (clone and tgkill with conditions, below)
	"futex", "sched_yield", "nanosleep", "clock_nanosleep", "gettid", "getpid", "exit", "exit_group", "restart_syscall",
	// signals: the runtime's preemption (SIGURG) and its handlers
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack",
	// the runtime's poller and clocks
	"epoll_pwait", "epoll_wait", "epoll_ctl", "clock_gettime", "gettimeofday", "sched_getaffinity",
}

// cloneThread is CLONE_THREAD: a new thread of this process, never a new process.
const cloneThread = 0x00010000

// sandbox makes this process end with its parent (the query worker), and able to make only the system
// calls above: an allow list, loaded before the first request, after the Go runtime has started
// (inherited by every thread, present and future). The pipes it was started with stay usable.
func sandbox() error {
	// The engine ends with its worker, however the worker ends (killed past its time or memory limit).
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0); errno != 0 {
		return errno
	}
	parent := syscall.Getppid()
	if parent == 1 {
		return errors.New("the worker ended before the engine started")
	}
	pid := uint64(syscall.Getpid())
	err := seccomp.LoadFilter(seccomp.Filter{
		NoNewPrivs: true,
		Flag:       seccomp.FilterFlagTSync,
		Policy: seccomp.Policy{
			DefaultAction: seccomp.ActionErrno,
			Syscalls: []seccomp.SyscallGroup{{
				Action: seccomp.ActionAllow,
				Names:  allowed,
				NamesWithCondtions: []seccomp.NameWithConditions{
					// New threads only (the runtime's clone always sets CLONE_THREAD); no fork.
					{Name: "clone", Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.BitsSet, Value: cloneThread}}},
					// Signals to its own threads only (preemption), never to another process.
					{Name: "tgkill", Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.Equal, Value: pid}}},
				},
			}},
		},
	})
	if err != nil {
		return err
	}
	return proveSandbox(parent)
}

// proveSandbox shows that the filter holds, each time the engine starts: opening a directory, making a
// socket, setting up io_uring, signalling the parent and starting a process all fail with EPERM.
func proveSandbox(parent int) error {
	if fd, err := syscall.Open("/", syscall.O_RDONLY, 0); !errors.Is(err, syscall.EPERM) {
		syscall.Close(fd)
		return fmt.Errorf("opening a file was not refused (%v)", err)
	}
	if fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0); !errors.Is(err, syscall.EPERM) {
		syscall.Close(fd)
		return fmt.Errorf("making a socket was not refused (%v)", err)
	}
	// io_uring_setup(0, NULL): EPERM from the filter (without it: EINVAL or ENOSYS).
	if _, _, errno := syscall.RawSyscall(425, 0, 0, 0); errno != syscall.EPERM {
		return fmt.Errorf("io_uring_setup was not refused (%v)", errno)
	}
	// Signal 0 to the parent only checks that it may be signalled: refused.
	if _, _, errno := syscall.RawSyscall(syscall.SYS_KILL, uintptr(parent), 0, 0); errno != syscall.EPERM {
		return fmt.Errorf("signalling another process was not refused (%v)", errno)
	}
	// A fork-style clone (SIGCHLD, no CLONE_THREAD): refused. Were it not, the child leaves at once.
	r, _, errno := syscall.RawSyscall(syscall.SYS_CLONE, uintptr(syscall.SIGCHLD), 0, 0)
	if errno == 0 && r == 0 {
		syscall.RawSyscall(syscall.SYS_EXIT_GROUP, 0, 0, 0)
	}
	if errno != syscall.EPERM {
		return fmt.Errorf("starting a process was not refused (%v)", errno)
	}
	return nil
}
