package broker

import (
	"fmt"
	"os"
	"path/filepath"
)

// DefaultDataDir is where `streamrun broker` keeps its data when told
// neither a directory nor memory: <user cache dir>/streamrun/broker (the
// temporary directory when there is no cache directory).
func DefaultDataDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "streamrun", "broker")
}

// ReadyLine is the one line `streamrun broker` prints once c accepts
// connections, which scripts and containers wait for and read the
// addresses from: "streamrun broker ready service_url=URL", then
// admin_url, admin_url_tls, brokers, service_url_tls, data (a
// directory, or "memory") and pprof_url, each only when it is on.
func (c *Cluster) ReadyLine() string {
	line := "streamrun broker ready service_url=" + c.ServiceURL()
	if u := c.AdminURL(); u != "" {
		line += " admin_url=" + u
	}
	if u := c.AdminURLTLS(); u != "" {
		line += " admin_url_tls=" + u
	}
	line += fmt.Sprintf(" brokers=%d", c.opts.Brokers)
	if u := c.ServiceURLTLS(); u != "" {
		line += " service_url_tls=" + u
	}
	if c.opts.Memory {
		line += " data=memory"
	} else {
		line += " data=" + c.opts.DataDir
	}
	if u := c.PprofURL(); u != "" {
		line += " pprof_url=" + u
	}
	return line
}
