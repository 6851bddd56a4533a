package testkit

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPUTime is the CPU time (user and system) used so far by this process
// (in a benchmark: the broker, the clients, the host) and by the
// processes pids (plugins, say). A benchmark reports the difference of
// two readings per message: on a shared machine it varies less than a
// rate. A pid that has gone counts nothing.
func CPUTime(pids ...int) time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	d := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		// utime and stime are fields 14 and 15 of stat, in clock ticks
		// (100 a second on Linux).
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		d += time.Duration(ut+st) * 10 * time.Millisecond
	}
	return d
}
