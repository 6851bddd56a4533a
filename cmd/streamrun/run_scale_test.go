package main

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
)

// TestRunScaleOutEmbedded runs two `streamrun run` hosts with one file
// against the embedded broker in a process of its own.
func TestRunScaleOutEmbedded(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three processes")
	}
	bin := buildStreamrun(t)
	b := startProc(t, "streamrun broker", t.TempDir(), bin, nil,
		"broker", "--memory", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--log-level", "warn")
	var url string
	re := regexp.MustCompile(`service_url=(\S+)`)
	brokertest.Eventually(t, time.Minute, "the broker's ready line", func() bool {
		m := re.FindStringSubmatch(b.stdout.String())
		if m != nil {
			url = m[1]
		}
		return m != nil
	})
	scaleOut(t, bin, url)
}

// TestRunScaleOutPulsar runs two `streamrun run` hosts with one file
// against Apache Pulsar.
func TestRunScaleOutPulsar(t *testing.T) {
	url := os.Getenv("STREAMRUN_PULSAR_URL")
	if url == "" {
		t.Skip("STREAMRUN_PULSAR_URL is not set: no Apache Pulsar to run against (.ci/run sets it)")
	}
	scaleOut(t, buildStreamrun(t), url)
}

func scaleOut(t *testing.T, bin, url string) {
	t.Run("BothTakeWork", func(t *testing.T) { scaleShare(t, bin, url) })
	t.Run("Kill9OneHost", func(t *testing.T) { scaleKill(t, bin, url) })
}

// startHosts starts two hosts running file, named a and b (the tagger
// handler marks each output with its host), and waits until both run.
func startHosts(t *testing.T, bin, file string) (a, b *proc) {
	t.Helper()
	dir := t.TempDir()
	a = startProc(t, "host a", dir, bin, []string{"STREAMRUN_TEST_HOST=a"}, "run", "--shutdown-timeout", "20s", file)
	b = startProc(t, "host b", dir, bin, []string{"STREAMRUN_TEST_HOST=b"}, "run", "--shutdown-timeout", "20s", file)
	for _, p := range []*proc{a, b} {
		brokertest.Eventually(t, 2*time.Minute, p.name+" running", func() bool {
			select {
			case <-p.done:
				t.Fatalf("%s exited with %d before running", p.name, p.code)
			default:
			}
			return strings.Contains(p.stderr.String(), `msg="host running"`)
		})
	}
	return a, b
}

// seqOf reads "k<key>:<seq>".
func seqOf(t *testing.T, payload string) (string, int) {
	t.Helper()
	k, s, ok := strings.Cut(payload, ":")
	n, err := strconv.Atoi(s)
	if !ok || err != nil {
		t.Fatalf("unexpected output %q", payload)
	}
	return k, n
}

func uniqueTopics(name string) (string, string) {
	id := time.Now().UnixNano()
	return fmt.Sprintf("scale-%s-in-%d", name, id), fmt.Sprintf("scale-%s-out-%d", name, id)
}

// scaleShare: both hosts take work, nothing is lost, and each key's
// outputs come in the order of its inputs (Key_Shared).
func scaleShare(t *testing.T, bin, url string) {
	const n, keys = 4000, 32
	in, out := uniqueTopics("share")
	file := writePipelineFile(t, t.TempDir(), "p.yaml", taggerPipeline(t, url, in, out, "key_shared", 20, 1, "2ms"))
	client := newClient(t, url)
	outs := collect(t, client, out)
	a, b := startHosts(t, bin, file)
	publishKeyed(t, client, in, n, keys)
	brokertest.Eventually(t, 3*time.Minute, fmt.Sprintf("%d outputs", n), func() bool { return outs.distinct() >= n })
	// SIGINT to one, SIGTERM (what Kubernetes sends) to the other: both
	// drain and exit 0.
	a.signal(t, syscall.SIGINT)
	b.signal(t, syscall.SIGTERM)
	for _, p := range []*proc{a, b} {
		if code := p.wait(t, time.Minute); code != 0 {
			t.Errorf("%s: exit %d after the signal", p.name, code)
		}
		if !strings.Contains(p.stderr.String(), "streamrun run: interrupted") {
			t.Errorf("%s does not say it was interrupted", p.name)
		}
	}

	byHost := map[string]int{}
	last := map[string]int{}
	for _, m := range outs.all() {
		byHost[m.Properties["host"]]++
		k, seq := seqOf(t, string(m.Payload))
		if prev, ok := last[k]; ok && seq <= prev {
			t.Errorf("key %s: output %d after %d: order not kept", k, seq, prev)
		}
		last[k] = seq
	}
	if byHost["a"] == 0 || byHost["b"] == 0 {
		t.Errorf("one host took no work: %v", byHost)
	}
	if got := outs.len(); got != n {
		t.Errorf("%d outputs for %d inputs (duplicates with no failure)", got, n)
	}
	t.Logf("%d inputs, %d keys: host a %d outputs, host b %d", n, keys, byHost["a"], byHost["b"])
}

// scaleKill: kill -9 of one host mid-run; the other finishes the work,
// nothing is lost, and each key's first outputs keep its order (after the
// kill, messages the dead host had not acknowledged come again: at least
// once).
func scaleKill(t *testing.T, bin, url string) {
	const n, keys = 6000, 32
	in, out := uniqueTopics("kill")
	file := writePipelineFile(t, t.TempDir(), "p.yaml", taggerPipeline(t, url, in, out, "key_shared", 20, 1, "5ms"))
	client := newClient(t, url)
	outs := collect(t, client, out)
	a, b := startHosts(t, bin, file)
	publishKeyed(t, client, in, n, keys)
	brokertest.Eventually(t, 3*time.Minute, "both hosts to take work", func() bool {
		seen := map[string]bool{}
		for _, m := range outs.all() {
			seen[m.Properties["host"]] = true
		}
		return seen["a"] && seen["b"] && outs.len() >= n/4
	})
	before := outs.len()
	if before >= n {
		t.Fatalf("all %d done before the kill; make the run longer", n)
	}
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	a.wait(t, time.Minute)
	brokertest.Eventually(t, 3*time.Minute, fmt.Sprintf("host b to finish all %d", n), func() bool { return outs.distinct() >= n })
	b.signal(t, syscall.SIGINT)
	if code := b.wait(t, time.Minute); code != 0 {
		t.Errorf("host b: exit %d after SIGINT", code)
	}

	all := outs.all()
	afterKill := map[string]int{}
	first := map[string]bool{}
	last := map[string]int{}
	for i, m := range all {
		if i >= before {
			afterKill[m.Properties["host"]]++
		}
		p := string(m.Payload)
		if first[p] {
			continue // a redelivery of what the killed host had not acknowledged
		}
		first[p] = true
		k, seq := seqOf(t, p)
		if prev, ok := last[k]; ok && seq <= prev {
			t.Errorf("key %s: first output of %d after %d: order not kept", k, seq, prev)
		}
		last[k] = seq
	}
	for i := range n {
		if p := fmt.Sprintf("k%d:%d", i%keys, i/keys); !first[p] {
			t.Errorf("input %s lost", p)
		}
	}
	if afterKill["b"] == 0 {
		t.Errorf("host b did nothing after the kill: %v", afterKill)
	}
	t.Logf("kill -9 of host a after %d outputs; %d outputs in all for %d inputs (%d redelivered), host b %d after the kill",
		before, len(all), n, len(all)-n, afterKill["b"])
}
