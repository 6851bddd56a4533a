//go:build linux

package host

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkWakeup is the floor under every call to a plugin on the
// machine it runs on: one byte bounced over two pipes between two
// threads of one process, or between this process and a child, each
// side blocked in read(2) until the other writes. A call to a plugin
// wakes the plugin and then the host at least once each; an in-process
// handler needs neither. The placements: wherever the scheduler puts
// the two sides (cpus=any), both on CPU 0 (cpus=same), and one on CPU 0,
// the other on CPU 1 (cpus=apart, where every write wakes an idle CPU).
// µs/trip is wall time a round trip, cpu-µs/trip the CPU time both sides
// spent on it (getrusage and /proc/PID/stat). docs/benchmarks/design.md ("What a
// wake-up costs") has figures and what they mean for BenchmarkPipeline.
func BenchmarkWakeup(b *testing.B) {
	for _, sides := range []string{"threads", "processes"} {
		for _, cpus := range []string{"any", "same", "apart"} {
			b.Run(fmt.Sprintf("sides=%s/cpus=%s", sides, cpus), func(b *testing.B) {
				if cpus == "apart" && runtime.NumCPU() < 2 {
					b.Skip("one CPU: nothing to keep apart")
				}
				benchWakeup(b, sides == "processes", cpus)
			})
		}
	}
}

// pongCPUEnv tells the "pong" role which CPU to keep to (-1: any).
const pongCPUEnv = "STREAMRUN_PLUGIN_TEST_PONG_CPU"

func benchWakeup(b *testing.B, processes bool, cpus string) {
	pingCPU, pongCPU := -1, -1
	switch cpus {
	case "same":
		pingCPU, pongCPU = 0, 0
	case "apart":
		pingCPU, pongCPU = 0, 1
	}
	// to: ping -> pong; from: pong -> ping.
	var to, from [2]int
	if err := syscall.Pipe2(to[:], syscall.O_CLOEXEC); err != nil {
		b.Fatal(err)
	}
	if err := syscall.Pipe2(from[:], syscall.O_CLOEXEC); err != nil {
		b.Fatal(err)
	}
	var pid int
	done := make(chan error, 1)
	if processes {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), roleEnv+"=pong", pongCPUEnv+"="+strconv.Itoa(pongCPU))
		// The child's descriptors 3 and 4.
		cmd.ExtraFiles = []*os.File{os.NewFile(uintptr(to[0]), "to"), os.NewFile(uintptr(from[1]), "from")}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		_ = syscall.Close(to[0])
		_ = syscall.Close(from[1])
		pid = cmd.Process.Pid
		go func() { done <- cmd.Wait() }()
	} else {
		go func() {
			// Locked to the end: the thread, kept to a CPU, exits with
			// the goroutine instead of going back to the runtime.
			runtime.LockOSThread()
			done <- pong(to[0], from[1], pongCPU)
			_ = syscall.Close(to[0])
			_ = syscall.Close(from[1])
		}()
	}
	defer func() {
		_ = syscall.Close(to[1]) // the pong side reads EOF and ends
		if err := <-done; err != nil {
			b.Errorf("pong side: %v", err)
		}
		_ = syscall.Close(from[0])
	}()

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if pingCPU >= 0 {
		// The thread goes back to the runtime with the CPUs it had.
		var had unix.CPUSet
		if err := unix.SchedGetaffinity(0, &had); err != nil {
			b.Fatal(err)
		}
		defer func() { _ = unix.SchedSetaffinity(0, &had) }()
		if err := keepTo(pingCPU); err != nil {
			b.Fatal(err)
		}
	}
	one := []byte{1}
	trip := func() error {
		if _, err := syscall.Write(to[1], one); err != nil {
			return err
		}
		if n, err := syscall.Read(from[0], one); n != 1 {
			return fmt.Errorf("read %d bytes: %v", n, err)
		}
		return nil
	}
	if err := trip(); err != nil { // the other side is up
		b.Fatal(err)
	}
	cpu0 := cpuTime(pid)
	t0 := time.Now()
	b.ResetTimer()
	for range b.N {
		if err := trip(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	wall, cpu := time.Since(t0), cpuTime(pid)-cpu0
	b.ReportMetric(float64(wall.Nanoseconds())/1e3/float64(b.N), "µs/trip")
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "cpu-µs/trip")
	b.ReportMetric(0, "ns/op")
}

// pong answers each byte read from r with a byte written to w until r
// ends, on CPU cpu (-1: wherever the scheduler puts it), on a thread the
// caller has locked and does not give back to the runtime.
func pong(r, w, cpu int) error {
	if cpu >= 0 {
		if err := keepTo(cpu); err != nil {
			return err
		}
	}
	b := []byte{0}
	for {
		n, err := syscall.Read(r, b)
		if n == 0 {
			return nil // EOF: the ping side is done
		}
		if err != nil {
			return err
		}
		if _, err := syscall.Write(w, b); err != nil {
			return err
		}
	}
}

// pongMain is the "pong" role: pong on the inherited descriptors 3 and 4.
func pongMain() {
	runtime.LockOSThread()
	cpu, _ := strconv.Atoi(os.Getenv(pongCPUEnv))
	if err := pong(3, 4, cpu); err != nil {
		fmt.Fprintln(os.Stderr, "pong:", err)
		os.Exit(1)
	}
}

// keepTo keeps the calling thread to CPU cpu.
func keepTo(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("keep the thread to CPU %d: %w", cpu, err)
	}
	return nil
}
