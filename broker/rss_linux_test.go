package broker_test

import (
	"bufio"
	"debug/buildinfo"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A `streamrun broker --memory` process gives its memory back to the OS
// soon after a topic is deleted, and after a retention trim: its resident
// size comes back near the idle figure within a minute (here the test
// allows a quarter of what filling the topic added), instead of staying
// at the peak. It measures the process as the OS sees it (VmRSS), not the
// Go heap: freed heap the runtime keeps is what a user's monitoring sees.
func TestMemoryBrokerRSSReturnsAfterDeleteAndTrim(t *testing.T) {
	if raceBuilt(t, streamrunBinary(t)) {
		// The race detector's shadow memory grows with the heap and is
		// not given back: the figure would be the detector's.
		t.Skip("the streamrun binary is race-built (GOFLAGS=-race): its resident size is the race detector's")
	}
	bp := startProcess(t, "--memory", "--http", "127.0.0.1:0", "--retention", "1s")
	if bp.adminURL == "" {
		t.Fatal("no admin_url in the ready line")
	}
	pid := bp.cmd.Process.Pid
	idle := vmRSS(t, pid)
	// 200,000 messages of 800 bytes, an entry each: about 160 MiB more
	// resident, well past the 64 MiB after which the broker gives memory
	// back.
	const n, size = 200_000, 800
	for _, c := range []struct {
		name, topic string
		free        func(topicURL string)
	}{
		{"delete", "deleted", func(topicURL string) { adminDo(t, "DELETE", topicURL+"?force=true", "", 204) }},
		// Without its only subscription the topic is trimmed after
		// Retention (1 s here).
		{"trim", "trimmed", func(topicURL string) { adminDo(t, "DELETE", topicURL+"/subscription/hold", "", 204) }},
	} {
		// A subscription holds every message until the test frees them.
		topicURL := bp.adminURL + "/admin/v2/persistent/public/default/" + c.topic
		adminDo(t, "PUT", topicURL, "", 204)
		adminDo(t, "PUT", topicURL+"/subscription/hold", "", 204)
		publishMany(t, serviceAddr(bp.serviceURL), "persistent://public/default/"+c.topic, n, size)
		peak := vmRSS(t, pid)
		if peak < idle+64<<20 {
			t.Fatalf("%s: resident %d MiB after %d messages, idle %d MiB: not measuring what the topic holds", c.name, peak>>20, n, idle>>20)
		}
		start := time.Now()
		c.free(topicURL)
		now := peak
		for now > idle+(peak-idle)/4 {
			if time.Since(start) > time.Minute {
				t.Fatalf("%s: resident %d MiB a minute after the %s, idle %d MiB, holding the topic %d MiB", c.name, now>>20, c.name, idle>>20, peak>>20)
			}
			time.Sleep(100 * time.Millisecond)
			now = vmRSS(t, pid)
		}
		t.Logf("%s: resident %d MiB idle, %d MiB holding %d messages of %d bytes, %d MiB %.1fs after the %s",
			c.name, idle>>20, peak>>20, n, size, now>>20, time.Since(start).Seconds(), c.name)
	}
}

// raceBuilt reports whether the binary at path was built with -race.
func raceBuilt(t *testing.T, path string) bool {
	t.Helper()
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Fatalf("build info of %s: %v", path, err)
	}
	for _, s := range info.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// vmRSS reads a process's resident set size from /proc.
func vmRSS(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}
