package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"
)

// startHTTP starts the admin REST API: on HTTP unless it is "-", and on
// HTTPS when set, one handler for both.
func (c *Cluster) startHTTP(ctx context.Context) error {
	if c.opts.HTTP == "-" && c.opts.HTTPS == "" {
		return nil
	}
	api := adminAPI{c}
	// Failed handshakes and the like go to the broker's log at debug, not
	// to the process's standard logger.
	c.httpSrv = &http.Server{Handler: api.adminHandler(), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(c.log.Handler(), slog.LevelDebug)}
	if c.opts.HTTP != "-" {
		ln, u, err := listenAdmin(ctx, c.opts.HTTP, "http", c.opts.AdvertisedHost)
		if err != nil {
			return err
		}
		c.adminURL = u
		api.serveAdmin(ln, u)
	}
	if c.opts.HTTPS != "" {
		ln, u, err := listenAdmin(ctx, c.opts.HTTPS, "https", c.opts.AdvertisedHost)
		if err != nil {
			return err
		}
		c.adminURLTLS = u
		api.serveAdmin(tls.NewListener(ln, c.tlsCfg), u)
	}
	return nil
}

// listenAdmin listens on addr and returns the URL clients use: named by
// the advertised host when there is one (a certificate names it), else by
// addr's host, a wildcard one as 127.0.0.1.
func listenAdmin(ctx context.Context, addr, scheme, advertised string) (net.Listener, string, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("broker: admin API: listen on %s: %w", addr, err)
	}
	host, _, _ := net.SplitHostPort(addr)
	if advertised != "" {
		host = advertised
	} else if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return ln, scheme + "://" + net.JoinHostPort(host, port), nil
}

func (c adminAPI) serveAdmin(ln net.Listener, url string) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if err := c.httpSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			c.log.Error("admin API stopped", "url", url, "err", err)
		}
	}()
	c.log.Info("admin API listening", "url", url)
}

// adminAuth authenticates and authorizes an admin request, answering
// 401 or 403 as Apache Pulsar does when it may not go on.
func (c adminAPI) adminAuth(w http.ResponseWriter, r *http.Request) bool {
	if !c.authRequired() {
		return true
	}
	role, err := c.authenticateHTTP(r.Context(), r.Header.Get("Authorization"))
	if err != nil {
		c.log.Info("admin request refused: authentication failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"reason": "Authentication required: " + err.Error()})
		return false
	}
	if !c.adminAuthorized(r, role) {
		c.log.Info("admin request refused: not authorized", "method", r.Method, "path", r.URL.Path, "role", role)
		writeJSON(w, refusedStatus(r.URL.Path), map[string]string{"reason": fmt.Sprintf("Unauthorized: role %q may not %s %s", role, r.Method, r.URL.Path)})
		return false
	}
	return true
}

// refusedStatus is the status Apache Pulsar answers an authenticated role
// that may not do a request: 403 for a namespace's or a topic's
// operations, 401 for the others (tenants, clusters, brokers, lookups).
func refusedStatus(path string) int {
	for _, p := range []string{"/admin/v2/namespaces/", "/admin/v2/persistent/", "/admin/v2/non-persistent/"} {
		if rest, ok := strings.CutPrefix(path, p); ok && strings.Contains(rest, "/") {
			return http.StatusForbidden
		}
	}
	return http.StatusUnauthorized
}
