package runtime_test

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/plugin"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// A Go plugin flows on each contract version it can be held to (1: gRPC,
// 2: the batch channel, 3: the batch channel with compact answers): the
// test handler echoes every message, which version 3 answers in a byte a
// message and the host rebuilds from its own copy, so every output has
// its input's payload and key, and every input is acknowledged.
func TestEchoesFlowOnEveryContractVersion(t *testing.T) {
	for v := 1; v <= plugin.ContractVersion; v++ {
		t.Run("version "+strconv.Itoa(v), func(t *testing.T) {
			c := cluster(t)
			cl := client(t, c)
			in, out := topic(t, "in"), topic(t, "out")
			const n = 1000
			publish(t, cl, in, n, func(i int) string { return fmt.Sprintf("echo-%d", i) }, func(i int) string { return fmt.Sprintf("k%d", i%7) })
			got := collect(t, cl, out)
			h := self(testConfig{Output: out})
			h.BatchSize = 100
			r := runHost(t, c, streamrun.Options{PluginEnv: []string{"STREAMRUN_PLUGIN_MAX_CONTRACT_VERSION=" + strconv.Itoa(v)}},
				pipelines.Pipeline{
					Name:    "echo",
					Source:  pipelines.Source{Topics: []string{in}, Subscription: "echo", InitialPosition: pipelines.Earliest},
					Handler: h,
					Outputs: []string{out},
				})
			want := map[string]string{}
			for i := range n {
				want[fmt.Sprintf("echo-%d", i)] = fmt.Sprintf("k%d", i%7)
			}
			checkOutputs(t, got.waitLen(t, n), want)
			waitFor(t, "every input acknowledged", func() bool { return r.stats("echo").Acked == n })
		})
	}
}
