package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// startHTTP starts the admin REST API: on HTTP unless it is "-", and on
// HTTPS when set, one handler for both.
func (c *Cluster) startHTTP(ctx context.Context) error {
	if c.opts.HTTP == "-" && c.opts.HTTPS == "" {
		return nil
	}
	c.httpSrv = &http.Server{Handler: c.adminHandler(), ReadHeaderTimeout: 10 * time.Second}
	if c.opts.HTTP != "-" {
		ln, u, err := listenAdmin(ctx, c.opts.HTTP, "http", c.opts.AdvertisedHost)
		if err != nil {
			return err
		}
		c.adminURL = u
		c.serveAdmin(ln, u)
	}
	if c.opts.HTTPS != "" {
		ln, u, err := listenAdmin(ctx, c.opts.HTTPS, "https", c.opts.AdvertisedHost)
		if err != nil {
			return err
		}
		c.adminURLTLS = u
		c.serveAdmin(tls.NewListener(ln, c.tlsCfg), u)
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

func (c *Cluster) serveAdmin(ln net.Listener, url string) {
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
func (c *Cluster) adminAuth(w http.ResponseWriter, r *http.Request) bool {
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
		writeJSON(w, http.StatusForbidden, map[string]string{"reason": fmt.Sprintf("Role %q is not authorized for %s %s", role, r.Method, r.URL.Path)})
		return false
	}
	return true
}
