package admin

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Probe: 2xx is healthy, with the bearer token sent; another answer is an
// error quoting its status and first line; a URL that is no URL is an
// *OptionError.
func TestProbe(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("pipeline orders: starting\nmore\n"))
			return
		}
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	defer srv.Close()
	hc := srv.Client()
	defer hc.CloseIdleConnections()
	ctx := context.Background()
	if status, err := Probe(ctx, hc, srv.URL+"/health", "tok"); err != nil || status != "200 OK" {
		t.Errorf("healthy: %q, %v", status, err)
	}
	if _, err := Probe(ctx, hc, srv.URL+"/health", ""); err == nil || !strings.HasSuffix(err.Error(), ": 401 Unauthorized") {
		t.Errorf("without the token: %v", err)
	}
	_, err := Probe(ctx, hc, srv.URL+"/readyz", "")
	if want := srv.URL + "/readyz: 503 Service Unavailable: pipeline orders: starting"; err == nil || err.Error() != want {
		t.Errorf("unready: %v, want %s", err, want)
	}
	var oe *OptionError
	if _, err := Probe(ctx, hc, "http://bad host/", ""); !errors.As(err, &oe) || oe.Field != "URL" {
		t.Errorf("a bad URL: %v", err)
	}
}
