package control_test

import (
	"crypto/tls"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/streamrun/streamrun"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/control"
	"github.com/streamrun/streamrun/pipelines"
)

// Beyond loopback the API needs TLS and a token key: without them it is
// refused at start; with them, a request without a valid token gets 401
// and changes nothing, one with a token signed by the key is served,
// over TLS only.
func TestBeyondLoopbackTheAPINeedsTLSAndAToken(t *testing.T) {
	peer := brokertest.Target(t)
	ctx := brokertest.Context(t, time.Minute)
	run, err := streamrun.Start(ctx, streamrun.Options{ServiceURL: peer.URL, Logger: slog.New(slog.DiscardHandler),
		Pipelines: []pipelines.File{{Pipelines: []pipelines.Pipeline{{Name: "p", Source: pipelines.Source{Topics: []string{brokertest.TopicName(t)}, Subscription: "s"},
			Steps: []pipelines.Step{{Filter: "true"}}, Outputs: []string{brokertest.TopicName(t) + "-out"}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run.Stop(); _ = run.Wait() })
	if _, err := control.Serve(run, control.Options{Addr: "0.0.0.0:0"}); err == nil || !strings.Contains(err.Error(), "beyond loopback") {
		t.Errorf("Serve on 0.0.0.0 with neither TLS nor a token key: %v, want a refusal", err)
	}
	ca := brokertest.NewCA(t, "control")
	cert, key := ca.Server("control", "127.0.0.1")
	if _, err := control.Serve(run, control.Options{Addr: "0.0.0.0:0", CertFile: cert, KeyFile: key}); err == nil {
		t.Error("TLS without a token key beyond loopback was served")
	}

	secret := brokertest.SecretKey(t)
	h := startHost(t, control.Options{Addr: "0.0.0.0:0", CertFile: cert, KeyFile: key, TokenSecretKey: secret})
	// The listener is on every address; the certificate names 127.0.0.1.
	h.base = strings.Replace(h.base, "0.0.0.0", "127.0.0.1", 1)
	h.base = strings.Replace(h.base, "[::]", "127.0.0.1", 1)
	if !strings.HasPrefix(h.base, "https://") {
		t.Fatalf("base %s: want https", h.base)
	}
	h.c = &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}

	for _, tok := range []string{"", "not-a-jwt", brokertest.Token(t, []byte("another key"), "ops", time.Now().Add(time.Hour)),
		brokertest.Token(t, secret, "ops", time.Now().Add(-time.Minute))} {
		h.token = tok
		for _, rq := range []struct{ method, path string }{{"GET", "/pipelines"}, {"GET", "/pipelines/up"}, {"POST", "/pipelines/up/pause"},
			{"POST", "/pipelines/up/resume"}, {"GET", "/pipelines/up/tap"}, {"GET", "/files"}, {"POST", "/reload/dry-run"}, {"POST", "/reload"},
			{"GET", "/openapi.yaml"}, {"GET", "/no/such/route"}} {
			code, body := h.do(rq.method, rq.path, nil)
			if code != http.StatusUnauthorized || !strings.Contains(string(body), "authentication failed") {
				t.Errorf("%s %s with token %.12q: %d %s, want 401", rq.method, rq.path, tok, code, body)
			}
		}
	}
	if p := h.run.Host().Health(); p[1].State != "healthy" {
		t.Errorf("up after the refused pause: %s", p[1].State)
	}
	h.token = brokertest.Token(t, secret, "ops", time.Now().Add(time.Hour))
	if ps := h.pipelines(); len(ps) != 2 {
		t.Errorf("with a valid token: %v", ps)
	}
	// The token in the query, for the browser's event stream.
	tok := h.token
	h.token = ""
	h.want(http.StatusOK, "GET", "/pipelines?access_token="+tok, nil, nil)

	// Plain HTTP to the TLS port is not served.
	plain := &http.Client{Timeout: 10 * time.Second}
	resp, err := plain.Get(strings.Replace(h.base, "https://", "http://", 1) + "/pipelines")
	if err == nil {
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP was served")
		}
		resp.Body.Close()
	}
}
