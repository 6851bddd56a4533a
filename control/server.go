package control

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/streamrun/streamrun"
	"github.com/streamrun/streamrun/broker/auth"
)

// Server serves the control API and the console of one run.
type Server struct {
	run    *streamrun.Run
	opts   Options
	log    *slog.Logger
	verify *auth.TokenVerifier // nil: no token asked for
	tls    bool

	srv     *http.Server
	ln      net.Listener
	rates   *rates
	closing chan struct{} // closed by Close: taps end
	wg      sync.WaitGroup
	once    sync.Once
}

// route is one route of the API: what openapi.yaml documents
// (TestTheOpenAPIFileDescribesEveryRoute).
type route struct {
	method, path string
	handle       func(s *Server, w http.ResponseWriter, r *http.Request)
	changes      bool // refused when ReadOnly
}

// routes are the API's routes, under /api/v1.
var routes = []route{
	{"GET", "/pipelines", (*Server).listPipelines, false},
	{"GET", "/pipelines/{name}", (*Server).getPipeline, false},
	{"POST", "/pipelines/{name}/pause", (*Server).pause, true},
	{"POST", "/pipelines/{name}/resume", (*Server).resume, true},
	{"GET", "/pipelines/{name}/tap", (*Server).tap, false},
	{"GET", "/files", (*Server).listFiles, false},
	{"POST", "/reload/dry-run", (*Server).dryRun, false},
	{"POST", "/reload", (*Server).apply, true},
	{"GET", "/openapi.yaml", (*Server).openAPI, false},
}

// APIPrefix is where the API's routes are.
const APIPrefix = "/api/v1"

// Serve starts serving run's control API and console as o says, until
// Close (or the run ends: Close it then). An address beyond loopback
// without TLS and a token key is refused, as is a bad key or
// certificate.
func Serve(run *streamrun.Run, o Options) (*Server, error) {
	o = o.withDefaults()
	if o.Addr == "" {
		return nil, errors.New("control: no listen address")
	}
	if run == nil {
		return nil, errors.New("control: no run to serve")
	}
	addr, loopback, err := listenAddr(o.Addr)
	if err != nil {
		return nil, err
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return nil, errors.New("control: a certificate and its key go together: give both or neither")
	}
	s := &Server{run: run, opts: o, log: o.Logger, closing: make(chan struct{}), tls: o.CertFile != ""}
	if s.verify, err = auth.NewTokenVerifier(o.TokenSecretKey, o.TokenPublicKey, o.TokenAuthClaim); err != nil {
		return nil, fmt.Errorf("control: token key: %w", err)
	}
	if !loopback && (!s.tls || s.verify == nil) {
		return nil, fmt.Errorf("control: %s is beyond loopback: it needs TLS (a certificate and key) and a token key, "+
			"or listen on 127.0.0.1", o.Addr)
	}
	var cfg *tls.Config
	if s.tls {
		cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("control: TLS certificate: %w", err)
		}
		cfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("control: listen on %s: %w", addr, err)
	}
	if cfg != nil {
		ln = tls.NewListener(ln, cfg)
	}
	s.ln = ln
	s.srv = &http.Server{Handler: s.handler(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	s.rates = newRates(run, o.RateInterval)
	s.wg.Go(func() { s.rates.loop(s.closing) })
	s.wg.Go(func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("control API stopped", "addr", addr, "err", err)
		}
	})
	s.log.Info("serving the control API and console", "url", s.URL(), "token", s.verify != nil, "read_only", o.ReadOnly)
	return s, nil
}

// listenAddr is addr with loopback for a missing host, and whether it
// stays on loopback.
func listenAddr(addr string) (string, bool, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", false, fmt.Errorf("control: address %q: want host:port or :port: %w", addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	loopback := host == "localhost"
	if ip := net.ParseIP(host); ip != nil {
		loopback = ip.IsLoopback()
	}
	return net.JoinHostPort(host, port), loopback, nil
}

// Addr is the address served.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is the console's URL.
func (s *Server) URL() string {
	scheme := "http"
	if s.tls {
		scheme = "https"
	}
	return scheme + "://" + s.Addr() + "/"
}

// Close stops serving: the taps end, and requests under way get until
// ctx ends.
func (s *Server) Close(ctx context.Context) error {
	var err error
	s.once.Do(func() {
		close(s.closing)
		err = s.srv.Shutdown(ctx)
		s.wg.Wait()
	})
	return err
}

// handler routes the API (behind the token check) and the console.
func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	// probe knows the routes' paths, to tell a wrong method (405) from a
	// wrong path (404) under the API's catch-all.
	probe := http.NewServeMux()
	for _, rt := range routes {
		probe.HandleFunc(rt.method+" "+APIPrefix+rt.path, http.NotFound)
		h := rt.handle
		changes := rt.changes
		mux.HandleFunc(rt.method+" "+APIPrefix+rt.path, func(w http.ResponseWriter, r *http.Request) {
			if !s.authorized(w, r) {
				return
			}
			if changes && s.opts.ReadOnly {
				writeError(w, http.StatusForbidden, "the control API is read-only (control.read_only): changes are refused", nil)
				return
			}
			h(s, w, r)
		})
	}
	mux.HandleFunc(APIPrefix+"/", func(w http.ResponseWriter, r *http.Request) {
		if !s.authorized(w, r) {
			return
		}
		var allow []string
		for _, rt := range routes {
			r2 := r.Clone(r.Context())
			r2.Method = rt.method
			if _, pat := probe.Handler(r2); pat == rt.method+" "+APIPrefix+rt.path {
				allow = append(allow, rt.method)
			}
		}
		if len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s %s: want %s", r.Method, r.URL.Path, strings.Join(allow, " or ")), nil)
			return
		}
		writeError(w, http.StatusNotFound, fmt.Sprintf("no route %s %s", r.Method, r.URL.Path), nil)
	})
	console := consoleHandler()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "the console is read with GET", http.StatusMethodNotAllowed)
			return
		}
		console.ServeHTTP(w, r)
	})
	return securityHeaders(mux)
}

// authorized checks the request's token when one is asked for, and
// answers 401 when it is missing or invalid.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	if s.verify == nil {
		return true
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		tok = r.URL.Query().Get("access_token")
	}
	if _, err := s.verify.Verify(strings.TrimSpace(tok)); err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="streamrun"`)
		writeError(w, http.StatusUnauthorized, "authentication failed: "+err.Error(), nil)
		return false
	}
	return true
}

// securityHeaders keep the console's pages to what the host serves.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		h.ServeHTTP(w, r)
	})
}
