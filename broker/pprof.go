package broker

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// The Go profiler (Options.Pprof) is how the broker's CPU per message was
// found and is measured (docs/benchmarks/brokers.md). It has a listener and a mux
// of its own, so that it never shows up on the admin API and its
// authentication does not stand in a profile's way.

// startPprof serves the profiler on Options.Pprof, if set.
func (c *Cluster) startPprof() error {
	if c.opts.Pprof == "" {
		return nil
	}
	ln, err := net.Listen("tcp", c.opts.Pprof)
	if err != nil {
		return fmt.Errorf("broker: profiler on %s: %w", c.opts.Pprof, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	c.pprofSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	c.pprofURL = "http://" + ln.Addr().String() + "/debug/pprof/"
	c.pprofDone = make(chan struct{})
	go func() {
		defer close(c.pprofDone)
		// Serve ends with ErrServerClosed from stopPprof, or with the
		// listener's error; either way the broker goes on without it.
		_ = c.pprofSrv.Serve(ln)
	}()
	return nil
}

// stopPprof stops the profiler and waits for it.
func (c *Cluster) stopPprof() {
	if c.pprofSrv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if c.pprofSrv.Shutdown(ctx) != nil {
		c.pprofSrv.Close()
	}
	<-c.pprofDone
}

// PprofURL is where the profiler answers (Options.Pprof), as
// http://HOST:PORT/debug/pprof/; "" when it is off.
func (c *Cluster) PprofURL() string { return c.pprofURL }
