package runtime_test

import (
	"log/slog"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// A window pipeline on two hosts: the second waits on the Exclusive
// subscription while the first runs, and takes over when the first is
// killed with SIGKILL mid-stream, reading the open windows (or, in
// incremental mode, the accumulators) back from the changelog. Every
// tumbling window's result still equals the reference; the second host
// answers part of them.
func TestWindowsEqualTheReferenceThroughAFailoverToAWaitingHost(t *testing.T) {
	for _, mode := range []pipelines.WindowMode{pipelines.ModeMessages, pipelines.ModeIncremental} {
		t.Run(string(mode), func(t *testing.T) {
			peer := brokertest.Target(t)
			base := brokertest.TopicName(t)
			in, out := base+"-in", base+"-out"
			cl := clientURL(t, peer.URL)
			msgs := generate(uint64(len(base))+2, 400, 5)
			w := windowKinds[0].w
			w.Time, w.Mode = pipelines.TimeEvent, mode
			ref, _ := referenceWindows(w, msgs)
			incr := mode == pipelines.ModeIncremental
			outs := collect(t, cl, out)
			answered := func() int {
				if incr {
					return len(accResults(t, outs))
				}
				return len(windowResults{outs}.get(t))
			}
			publishGenerated(t, cl, in, msgs, false)

			first := startWindowHost(t, peer.URL, in, out, incrementalEnv(incr)...)
			waitFor(t, "a few windows from the first host", func() bool { return answered() >= 5 })
			second := runHostWaiting(t, streamrun.Options{Pool: pool.Options{ServiceURL: peer.URL}, Logger: testLogger(t, slog.LevelWarn)},
				windowPipeline(in, out, w, windowConfig{Incremental: incr}))
			time.Sleep(200 * time.Millisecond) // the second host is waiting on the subscription
			if err := first.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = first.Wait()
			before := answered()
			t.Logf("the first host killed with %d windows answered", before)

			deadline := time.Now().Add(testTimeout)
			for {
				var diff string
				if incr {
					diff = accAgree(accResults(t, outs), accSums(ref))
				} else {
					diff = agree(windowResults{outs}.get(t), ref)
				}
				if diff == "" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the windows differ from the reference: %s", diff)
				}
				time.Sleep(50 * time.Millisecond)
			}
			// The second host must have taken part: acknowledged inputs the
			// first left, or answered windows it read back. The first
			// acknowledges an input once it is in the changelog, so it may
			// have acknowledged every input and still left most windows to
			// the second, which then answers them from the changelog alone.
			if before >= len(ref) {
				t.Errorf("the first host answered every window (%d) before it was killed: no failover was tested", before)
			}
			if s := second.stats("windows"); s.Acked == 0 && s.Processed == 0 {
				t.Errorf("the second host neither acknowledged an input nor answered a window (stats %+v): the first had finished before it was killed", s)
			}
		})
	}
}

// startWindowHost starts the test binary as a host (windowChildHost) of
// the tumbling pipeline of in and out, with env added
// (STREAMRUN_TEST_INCREMENTAL, STREAMRUN_TEST_TIME), and waits until it
// runs; the test kills it.
func startWindowHost(t *testing.T, url, in, out string, env ...string) *exec.Cmd {
	t.Helper()
	return startChildHost(t, "windowhost", "first host",
		append([]string{"STREAMRUN_TEST_URL=" + url, "STREAMRUN_TEST_IN=" + in, "STREAMRUN_TEST_OUT=" + out}, env...)...)
}

// incrementalEnv is the child window host's setting for incremental
// windows, if incr.
func incrementalEnv(incr bool) []string {
	if incr {
		return []string{"STREAMRUN_TEST_INCREMENTAL=1"}
	}
	return nil
}
