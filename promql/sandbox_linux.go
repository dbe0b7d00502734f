package main

import (
	"errors"
	"fmt"
	"syscall"

	seccomp "github.com/elastic/go-seccomp-bpf"
)

// sandbox makes this process end with its parent (the query worker), and unable to reach any file or
// network, or to start programs: it only computes over what the worker sends on stdin. A seccomp filter
// (inherited by every thread, present and future) fails those system calls with EPERM; the pipes it
// was started with stay usable. Loaded before the first request, after the Go runtime has started.
func sandbox() error {
	// The engine ends with its worker, however the worker ends (killed past its time or memory limit).
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0); errno != 0 {
		return errno
	}
	if syscall.Getppid() == 1 {
		return errors.New("the worker ended before the engine started")
	}
	err := seccomp.LoadFilter(seccomp.Filter{
		NoNewPrivs: true,
		Flag:       seccomp.FilterFlagTSync,
		Policy: seccomp.Policy{
			DefaultAction: seccomp.ActionAllow,
			Syscalls: []seccomp.SyscallGroup{{
				Action: seccomp.ActionErrno,
				Names: []string{
					// files
					"open", "openat", "openat2", "creat", "open_by_handle_at", "name_to_handle_at",
					"mkdir", "mkdirat", "mknod", "mknodat", "unlink", "unlinkat", "rmdir",
					"rename", "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat",
					"truncate", "chmod", "fchmodat", "chown", "lchown", "fchownat", "chdir", "chroot",
					"mount", "umount2", "pivot_root", "memfd_create",
					// network and other processes
					"socket", "socketpair", "connect", "bind", "listen", "accept", "accept4",
					"execve", "execveat", "fork", "vfork", "ptrace", "process_vm_readv", "process_vm_writev",
				},
			}},
		},
	})
	if err != nil {
		return err
	}
	// Proof that it holds, each time the engine starts: opening a directory and making a socket fail.
	if fd, err := syscall.Open("/", syscall.O_RDONLY, 0); !errors.Is(err, syscall.EPERM) {
		syscall.Close(fd)
		return fmt.Errorf("opening a file was not refused (%v)", err)
	}
	if fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0); !errors.Is(err, syscall.EPERM) {
		syscall.Close(fd)
		return fmt.Errorf("making a socket was not refused (%v)", err)
	}
	return nil
}
