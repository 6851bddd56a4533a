package broker_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
)

// The ready line names the addresses a script reads from it, the
// brokers, and where the data is: "memory" or the directory.
func TestReadyLine(t *testing.T) {
	c := brokertest.Start(t, func(o *broker.Options) { o.Brokers = 2 })
	want := "streamrun broker ready service_url=" + c.ServiceURL()
	if u := c.AdminURL(); u != "" {
		want += " admin_url=" + u
	}
	want += " brokers=2 data=memory"
	if got := c.ReadyLine(); got != want {
		t.Errorf("ready line\n got %s\nwant %s", got, want)
	}
	dir := t.TempDir()
	d := brokertest.Start(t, func(o *broker.Options) { o.Memory = false; o.DataDir = dir })
	if got := d.ReadyLine(); !strings.HasSuffix(got, " brokers=1 data="+dir) {
		t.Errorf("ready line on disk: %s", got)
	}
	if got := broker.DefaultDataDir(); filepath.Base(got) != "broker" || filepath.Base(filepath.Dir(got)) != "streamrun" {
		t.Errorf("default data dir %s", got)
	}
}
