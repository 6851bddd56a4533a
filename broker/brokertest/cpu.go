package brokertest

import (
	"time"

	"github.com/streamrun/streamrun/internal/testkit"
)

// CPUTime is the CPU time (user and system) used so far by this process
// (in a benchmark: the broker, the clients, the host) and by the
// processes pids (plugins, say). A benchmark reports the difference of
// two readings per message: on a shared machine it varies less than a
// rate. A pid that has gone counts nothing.
func CPUTime(pids ...int) time.Duration { return testkit.CPUTime(pids...) }
