package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"
)

// servePprof serves Go's profiler (net/http/pprof) on addr, for
// `streamrun broker --pprof`: it is how the broker's CPU per message was
// found and is measured (docs/benchmarks/brokers.md). It has its own mux, so the
// profiler never shows up on the admin API. It returns the field the ready
// line gets (" pprof_url=URL") and a function that stops the server and
// waits for it; with addr "" nothing is served and the field is "".
func servePprof(ctx context.Context, addr string) (string, func(), error) {
	if addr == "" {
		return "", func() {}, nil
	}
	if strings.HasPrefix(addr, ":") {
		// Loopback unless a host is named, as every listener (docs/security.md).
		addr = "127.0.0.1" + addr
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("--pprof %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Serve ends with ErrServerClosed from stop, or with the
		// listener's error; either way the broker goes on without it.
		_ = srv.Serve(ln)
	}()
	stop := func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			srv.Close()
		}
		<-done
	}
	return " pprof_url=http://" + ln.Addr().String() + "/debug/pprof/", stop, nil
}
