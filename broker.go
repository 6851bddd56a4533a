package streamrun

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/streamrun/streamrun/broker"
)

// The embedded broker's defaults, as `streamrun broker`'s, so that
// produce and consume find it without flags.
const (
	// DefaultDataDir is where the embedded broker keeps its data unless
	// BrokerOptions says otherwise.
	DefaultDataDir = ".streamrun/data"
	// DefaultBrokerListen and DefaultBrokerHTTP are its Pulsar port and
	// its admin API; a taken one gives way to a free port.
	DefaultBrokerListen = "127.0.0.1:6650"
	DefaultBrokerHTTP   = "127.0.0.1:8080"
)

// BrokerOptions configure the embedded broker a run starts in its own
// process when no file names a service URL (and Options.ServiceURL is
// "").
type BrokerOptions struct {
	// Memory keeps everything in memory: nothing survives the run.
	// Default false: data in DataDir.
	Memory bool
	// DataDir is the data directory, made if missing (by the broker).
	// Default
	// DefaultDataDir (relative to the working directory). Not with
	// Memory. When set, keyed state's spill files go to StateSpillDir
	// under it (whichever broker the run uses) instead of the system's
	// temporary directory (runtime.Options.StateDir).
	DataDir string
	// Listen is the address of its Pulsar port; port 0 is a free one.
	// Default "": DefaultBrokerListen, or a free port when that is taken
	// (a Pulsar or a broker already running here). An address given is
	// taken as it is.
	Listen string
	// HTTP is the address of its admin API, "-" for none. Default "":
	// DefaultBrokerHTTP, or a free port when that is taken.
	HTTP string
}

// stateDir is where keyed state spills the values its cache leaves out
// (runtime.Options.StateDir): StateSpillDir under DataDir when one is
// given, so that what a run writes stays in the directory it was told;
// "" otherwise, the runtime's default in the system's temporary
// directory.
func (bo BrokerOptions) stateDir() string {
	if bo.DataDir == "" {
		return ""
	}
	return filepath.Join(bo.DataDir, StateSpillDir)
}

// StateSpillDir is the directory under BrokerOptions.DataDir, when set,
// that holds keyed state's spill files.
const StateSpillDir = "state-spill"

// startBroker starts the embedded broker in this process and says so.
func (r *Run) startBroker(ctx context.Context) (*broker.Cluster, error) {
	bo := r.opts.Broker
	listenSet, httpSet := bo.Listen != "", bo.HTTP != ""
	opts := broker.Options{
		Listen: bo.Listen,
		HTTP:   bo.HTTP,
		Memory: bo.Memory,
		Logger: r.log.With("component", "broker"),
	}
	for _, p := range r.files.pipelines {
		// Its transactions need the coordinator, off by default as
		// Apache Pulsar's.
		if p.ExactlyOnce() {
			opts.Transactions = true
		}
	}
	if !listenSet {
		opts.Listen = DefaultBrokerListen
	}
	if !httpSet {
		opts.HTTP = DefaultBrokerHTTP
	}
	where := "data=memory"
	if !bo.Memory {
		opts.DataDir = bo.DataDir
		if opts.DataDir == "" {
			opts.DataDir = DefaultDataDir
		}
		where = "data=" + opts.DataDir
	}
	b, err := broker.Start(ctx, opts)
	if errors.Is(err, syscall.EADDRINUSE) && (!listenSet || !httpSet) {
		// A Pulsar or a broker already running here does not stop a run:
		// the default addresses give way to free ports.
		opts.Listen = freePort(opts.Listen, listenSet)
		opts.HTTP = freePort(opts.HTTP, httpSet)
		b, err = broker.Start(ctx, opts)
	}
	if err != nil {
		return nil, err
	}
	admin := b.AdminURL()
	if admin == "" {
		admin = "off"
	}
	r.notice(fmt.Sprintf("streamrun: no service_url in %s: embedded broker started in this process, service_url=%s admin_url=%s %s",
		strings.Join(r.files.names(), ", "), b.ServiceURL(), admin, where))
	return b, nil
}

// freePort is addr with port 0 (a free port), unless it was given or is
// "-" (off).
func freePort(addr string, given bool) string {
	if given || addr == "-" {
		return addr
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return net.JoinHostPort(host, "0")
}
