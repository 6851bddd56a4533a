package scrape

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Options configure a Server.
type Options struct {
	// Addr is the listen address. A missing host ("":9464") means
	// loopback (127.0.0.1), so that metrics are not exposed beyond the
	// machine unless asked for ("0.0.0.0:9464"). Required.
	Addr string
	// Metrics serves /metrics (NewMeterProvider's handler). Default nil:
	// /metrics answers 404.
	Metrics http.Handler
	// Live reports whether the process is alive, for /healthz: nil or an
	// error saying what is wrong. Default nil: alive while it serves.
	Live func() error
	// Ready reports whether it is ready, for /readyz. Default nil: ready
	// once serving.
	Ready func() error
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// Server serves /metrics, /healthz and /readyz.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
	log  *slog.Logger
}

// Listen starts serving; Close stops it.
func Listen(opts Options) (*Server, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	addr, err := ListenAddr(opts.Addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	if opts.Metrics != nil {
		mux.Handle("GET /metrics", opts.Metrics)
	}
	mux.Handle("GET /healthz", probe(opts.Live))
	mux.Handle("GET /readyz", probe(opts.Ready))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("scrape: listen on %s: %w", addr, err)
	}
	s := &Server{
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		ln:   ln,
		done: make(chan struct{}),
		log:  opts.Logger,
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("telemetry endpoint stopped", "addr", addr, "err", err)
		}
	}()
	return s, nil
}

// ListenAddr is addr with loopback for a missing host.
func ListenAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("scrape: address %q: want host:port or :port: %w", addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// Addr is the address it listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops serving, letting requests under way finish while ctx
// allows.
func (s *Server) Close(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		_ = s.srv.Close()
	}
	<-s.done
	return err
}

// probe answers 200 "ok" while check says nothing is wrong, else 503 with
// what is.
func probe(check func() error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if check != nil {
			if err := check(); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintln(w, err)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	})
}
