package broker_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
)

// With Options.Pprof the profiler answers at PprofURL, which the ready
// line names, on a listener of its own (not the admin API's), and stops
// when the cluster closes; without it there is no URL.
func TestPprof(t *testing.T) {
	c := brokertest.Start(t, func(o *broker.Options) { o.Pprof = ":0" })
	u := c.PprofURL()
	if !strings.HasPrefix(u, "http://127.0.0.1:") || !strings.HasSuffix(u, "/debug/pprof/") {
		t.Fatalf("PprofURL %q: want loopback for an address without a host", u)
	}
	if !strings.HasSuffix(c.ReadyLine(), " pprof_url="+u) {
		t.Errorf("ready line without pprof_url=%s: %s", u, c.ReadyLine())
	}
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(u + "cmdline")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(body) == 0 {
		t.Fatalf("GET %scmdline: %s %q", u, resp.Status, body)
	}
	if a := c.AdminURL(); a != "" {
		if resp, err := hc.Get(a + "/debug/pprof/cmdline"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Error("the admin API serves the profiler")
			}
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	hc.CloseIdleConnections()
	if resp, err := hc.Get(u + "cmdline"); err == nil {
		resp.Body.Close()
		t.Fatal("the profiler still answers after Close")
	}

	if d := brokertest.Start(t); d.PprofURL() != "" || strings.Contains(d.ReadyLine(), "pprof_url") {
		t.Errorf("a profiler without Options.Pprof: %q, %s", d.PprofURL(), d.ReadyLine())
	}
}
