//go:build !linux

package host

// pongMain: BenchmarkWakeup runs on Linux only.
func pongMain() {}
