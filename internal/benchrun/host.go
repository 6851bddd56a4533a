package benchrun

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// LoadAverage reads the 1, 5 and 15 minute load averages from
// /proc/loadavg; nil where there is none.
func LoadAverage() []float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nil
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return nil
	}
	out := make([]float64, 0, 3)
	for _, s := range f[:3] {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil
		}
		out = append(out, v)
	}
	return out
}

// FillHost sets the conditions that come from the host and the process:
// GOMAXPROCS, CPUs, Go version, OS, architecture and the load average at
// the start.
func (c *Conditions) FillHost(version string) {
	c.GOMAXPROCS = runtime.GOMAXPROCS(0)
	c.NumCPU = runtime.NumCPU()
	c.GoVersion = runtime.Version()
	c.OS, c.Arch = runtime.GOOS, runtime.GOARCH
	c.Version = version
	c.LoadAverageStart = LoadAverage()
	c.StartedAt = time.Now().UTC().Truncate(time.Second)
}

// Usage is a process's resource use so far.
type Usage struct {
	CPU    time.Duration // user + system
	MaxRSS int64         // bytes
}

// SelfUsage is this process's resource use so far (getrusage).
func SelfUsage() Usage {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return Usage{}
	}
	// Linux reports ru_maxrss in KiB.
	return Usage{CPU: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), MaxRSS: ru.Maxrss * 1024}
}
