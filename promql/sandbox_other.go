//go:build !linux

package main

// sandbox is Linux's seccomp filter (sandbox_linux.go); elsewhere the engine runs without one (the
// service's deployments are Linux: its Docker image, and these machines).
func sandbox() error { return nil }
