package securitytest

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/subscribe"
)

func (tg *target) client(t *testing.T, ctx context.Context, token string) (*pool.Client, error) {
	c, err := pool.New(ctx, pool.Options{ServiceURL: tg.url, Token: token, TLS: pool.TLSOptions{CAFile: tg.ca}})
	if err == nil {
		t.Cleanup(func() { c.Close(context.Background()) })
	}
	return c, err
}

func topic(ns, name string) string { return "persistent://" + ns + "/" + uniq(name) }

// A token signed with the key (per algorithm: a secret key, an RSA or an
// EC key pair), unexpired, with a subject connects, and so does one made
// by Apache Pulsar's tool with the standalone's key; an expired one,
// one signed with another key of the same algorithm, one that is not a
// JWT and no token at all are refused with AuthenticationError, on the
// binary port and on the admin API.
func TestTokenAuthentication(t *testing.T) {
	forEachAlg(t, func(t *testing.T, tg *target) {
		ctx := brokertest.Context(t, 2*time.Minute)
		c, err := tg.client(t, ctx, tg.token(t, tg.super))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Publish(ctx, topic("public/default", "authn"), pool.Message{Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		if code, body := tg.adminDo(t, "GET", "/admin/v2/tenants", tg.token(t, tg.super), ""); code != 200 || !strings.Contains(body, "public") {
			t.Fatalf("superuser lists tenants: %d %s", code, body)
		}
		if tg.key.tool != "" {
			tc, err := tg.client(t, ctx, tg.key.tool)
			if err == nil {
				_, err = tc.Publish(ctx, topic("public/default", "authn-tool"), pool.Message{Payload: []byte("x")})
			}
			code, body := tg.adminDo(t, "GET", "/admin/v2/tenants", tg.key.tool, "")
			if err != nil || code != http.StatusOK {
				t.Fatalf("a %s token made by bin/pulsar tokens create: publish: %v; admin API: %d %s", tg.key.alg, err, code, body)
			}
		}
		bad := map[string]string{
			"expired":     tg.key.token(t, tg.super, time.Now().Add(-time.Minute)),
			"another key": newTokenKey(t, tg.key.alg).token(t, tg.super, time.Time{}),
			"not a JWT":   "not-a-jwt",
			"none":        "",
		}
		for why, tok := range bad {
			_, err := tg.client(t, ctx, tok)
			if !errors.Is(err, pulsarwire.ErrAuthenticationError) || pool.Retryable(err) {
				t.Errorf("%s token: %v, want a final AuthenticationError", why, err)
			}
			if tok != "" && err != nil && strings.Contains(err.Error(), tok) {
				t.Errorf("%s token: the error quotes it: %v", why, err)
			}
			if code, body := tg.adminDo(t, "GET", "/admin/v2/tenants", tok, ""); code != http.StatusUnauthorized {
				t.Errorf("%s token, admin API: %d %s, want 401", why, code, body)
			}
		}
	})
}

// A role produces and consumes only where the namespace's permissions
// say (the role is the token's sub, per algorithm); grants and
// revocations go through the admin API at Apache Pulsar's paths, and only
// a superuser may make them.
func TestNamespaceAuthorization(t *testing.T) {
	forEachAlg(t, func(t *testing.T, tg *target) {
		ctx := brokertest.Context(t, 2*time.Minute)
		const ns = "public/default"
		role := uniq("role")
		tok, super := tg.token(t, role), tg.token(t, tg.super)
		perms := "/admin/v2/namespaces/" + ns + "/permissions"
		grant := func(actions string) {
			t.Helper()
			if code, body := tg.adminDo(t, "POST", perms+"/"+role, super, actions); code/100 != 2 {
				t.Fatalf("grant %s: %d %s", actions, code, body)
			}
		}
		tp := topic(ns, "authz")

		// Nothing granted: connecting works (authentication), using does not.
		c, err := tg.client(t, ctx, tok)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Publish(ctx, tp, pool.Message{Payload: []byte("x")}); !errors.Is(err, pulsarwire.ErrAuthorizationError) {
			t.Fatalf("publish without a grant: %v, want AuthorizationError", err)
		}
		// Listing the namespace's topics (a pattern subscription) needs consume.
		_, err = subscribe.New(ctx, c, subscribe.Options{Pattern: "persistent://" + ns + "/authz-.*", Subscription: "p"})
		if !errors.Is(err, pulsarwire.ErrAuthorizationError) {
			t.Fatalf("pattern subscription without a grant: %v, want AuthorizationError", err)
		}
		// A non-superuser may not grant itself anything, nor use the admin
		// API; Apache Pulsar answers 403 for a namespace's operations, 401
		// for the others.
		for _, c := range []struct {
			method, path, body string
			want               int
		}{
			{"POST", perms + "/" + role, `["produce","consume"]`, http.StatusForbidden},
			{"GET", perms, "", http.StatusForbidden},
			{"GET", "/admin/v2/tenants", "", http.StatusUnauthorized},
			{"GET", "/lookup/v2/topic/persistent/" + ns + "/x", "", http.StatusUnauthorized},
		} {
			if code, body := tg.adminDo(t, c.method, c.path, tok, c.body); code != c.want {
				t.Fatalf("%s %s by a role without permissions: %d %s, want %d", c.method, c.path, code, body, c.want)
			}
		}

		grant(`["produce"]`)
		brokertest.Eventually(t, time.Minute, "produce granted", func() bool {
			_, err := c.Publish(ctx, tp, pool.Message{Payload: []byte("x")})
			return err == nil
		})
		_, err = subscribe.New(ctx, c, subscribe.Options{Topics: []string{tp}, Subscription: "s"})
		if !errors.Is(err, pulsarwire.ErrAuthorizationError) {
			t.Fatalf("subscribe with produce only: %v, want AuthorizationError", err)
		}

		grant(`["produce","consume"]`)
		var sc *subscribe.Consumer
		brokertest.Eventually(t, time.Minute, "consume granted", func() bool {
			sc, err = subscribe.New(ctx, c, subscribe.Options{Topics: []string{tp}, Subscription: "s"})
			return err == nil
		})
		sc.Close(ctx)
		code, body := tg.adminDo(t, "GET", perms, super, "")
		var got map[string][]string
		// Apache Pulsar lists a role's actions in no fixed order.
		if code != 200 || json.Unmarshal([]byte(body), &got) != nil || strings.Join(slices.Sorted(slices.Values(got[role])), ",") != "consume,produce" {
			t.Fatalf("list permissions: %d %s, want %s: consume and produce", code, body, role)
		}

		if code, body := tg.adminDo(t, "DELETE", perms+"/"+role, super, ""); code/100 != 2 {
			t.Fatalf("revoke: %d %s", code, body)
		}
		brokertest.Eventually(t, time.Minute, "revocation applied", func() bool {
			_, err := c.Publish(ctx, topic(ns, "authz-revoked"), pool.Message{Payload: []byte("x")})
			return errors.Is(err, pulsarwire.ErrAuthorizationError)
		})
	})
}

// The client verifies the broker's host name: the same listener reached
// by a name its certificate does not hold is refused, saying so, on the
// binary port and on the admin API; a certificate from another CA is
// refused too, even with host name verification skipped.
func TestHostNameVerification(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		ctx := brokertest.Context(t, time.Minute)
		_, err := pool.New(ctx, pool.Options{ServiceURL: byIP(tg.url), Token: tg.token(t, tg.super), TLS: pool.TLSOptions{CAFile: tg.ca}})
		var hostname x509.HostnameError
		if !errors.As(err, &hostname) || pool.Retryable(err) || !strings.Contains(err.Error(), "127.0.0.1") {
			t.Fatalf("connecting by a name the certificate lacks: %v, want a final x509.HostnameError naming 127.0.0.1", err)
		}
		other := brokertest.NewCA(t, "other")
		_, err = pool.New(ctx, pool.Options{ServiceURL: tg.url, TLS: pool.TLSOptions{CAFile: other.File}})
		var unknown x509.UnknownAuthorityError
		if !errors.As(err, &unknown) {
			t.Fatalf("a certificate from an untrusted CA: %v, want x509.UnknownAuthorityError", err)
		}
		// Skipping the host name still checks the chain: by IP with the
		// right CA connects, with another CA does not.
		skip := pool.TLSOptions{CAFile: tg.ca, SkipHostnameVerification: true}
		c, err := pool.New(ctx, pool.Options{ServiceURL: byIP(tg.url), Token: tg.token(t, tg.super), TLS: skip})
		if err != nil {
			t.Fatalf("by IP, host name verification skipped: %v", err)
		}
		c.Close(ctx)
		skip.CAFile = other.File
		if _, err = pool.New(ctx, pool.Options{ServiceURL: byIP(tg.url), TLS: skip}); !errors.As(err, &unknown) {
			t.Fatalf("host name verification skipped, another CA: %v, want x509.UnknownAuthorityError", err)
		}
		req, _ := http.NewRequest("GET", byIP(tg.admin)+"/admin/v2/tenants", nil)
		if _, err := tg.httpsClient(t).Do(req); !errors.As(err, &hostname) {
			t.Fatalf("admin API by a name the certificate lacks: %v, want x509.HostnameError", err)
		}
	})
}

// TLS only: a broker with its plain ports off, the embedded one and Apache
// Pulsar alike. A client with a token and host name verification
// publishes and consumes over pulsar+ssl://; lookups and the cluster's
// record name TLS URLs only; and no port the broker's process listens on
// speaks plain Pulsar or serves the admin API over plain HTTP.
func TestTLSOnly(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		ctx := brokertest.Context(t, 2*time.Minute)
		super := tg.token(t, tg.super)
		c, err := tg.client(t, ctx, super)
		if err != nil {
			t.Fatal(err)
		}
		tp := topic("public/default", "tlsonly")
		if _, err := c.Publish(ctx, tp, pool.Message{Payload: []byte("over TLS")}); err != nil {
			t.Fatal(err)
		}
		sc, err := subscribe.New(ctx, c, subscribe.Options{Topics: []string{tp}, Subscription: "s", InitialPosition: subscribe.Earliest})
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close(ctx)
		if m, err := sc.Receive(ctx); err != nil || string(m.Payload) != "over TLS" {
			t.Fatalf("receive over TLS: %v %v", m, err)
		}
		tg.checkTLSURLsOnly(t, "/lookup/v2/topic/persistent/public/default/"+uniq("tlsonly"), super,
			map[string]string{"brokerUrlTls": tg.url, "httpUrlTls": tg.admin}, "brokerUrl", "httpUrl")
		tg.checkTLSURLsOnly(t, "/admin/v2/clusters/standalone", super,
			map[string]string{"brokerServiceUrlTls": tg.url, "serviceUrlTls": tg.admin}, "brokerServiceUrl", "serviceUrl")
		tg.checkNoPlainListener(t, ctx, super)
		if tg.embedded != nil {
			for _, ci := range tg.embedded.Connections(0) {
				if !ci.TLS {
					t.Fatalf("a plain connection: %+v", ci)
				}
			}
		}
	})
}

// checkTLSURLsOnly asks the admin API for path and checks that the answer
// holds the TLS URLs of want and none of the plain keys (Apache Pulsar
// leaves them out; "" would do too), and no plain URL under any key.
func (tg *target) checkTLSURLsOnly(t *testing.T, path, token string, want map[string]string, plain ...string) {
	t.Helper()
	code, body := tg.adminDo(t, "GET", path, token, "")
	var got map[string]any
	if code != http.StatusOK || json.Unmarshal([]byte(body), &got) != nil {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("GET %s: %s is %v, want %s (all: %s)", path, k, got[k], v, body)
		}
	}
	for _, k := range plain {
		if v, ok := got[k]; ok && v != "" {
			t.Errorf("GET %s: %s is %v in TLS-only mode", path, k, v)
		}
	}
	for k, v := range got {
		if s, ok := v.(string); ok && (strings.HasPrefix(s, "pulsar://") || strings.HasPrefix(s, "http://")) {
			t.Errorf("GET %s: a plain URL under %s: %s", path, k, s)
		}
	}
}

// checkNoPlainListener dials every TCP port the broker's process listens
// on (its TLS ports among them) with a plain pulsar:// client and with
// plain HTTP: none may connect or answer the admin API.
func (tg *target) checkNoPlainListener(t *testing.T, ctx context.Context, token string) {
	t.Helper()
	if tg.pid == 0 {
		t.Skipf("the rest needs the pid of the broker's process to list its sockets: set %s (scripts/pulsar start --name secure prints it)", securePIDEnv)
	}
	addrs := brokertest.ListeningAddrs(t, tg.pid)
	ports := map[string]bool{}
	for _, a := range addrs {
		ports[strconv.Itoa(a.Port)] = true
	}
	for _, u := range []string{tg.url, tg.admin} {
		if !ports[portOf(t, u)] {
			t.Fatalf("%s is not among the listeners %v of process %d: wrong pid?", u, addrs, tg.pid)
		}
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	for _, a := range addrs {
		plain := "pulsar://" + a.String()
		_, err := pool.New(ctx, pool.Options{ServiceURL: plain, Token: token, ConnectionTimeout: 5 * time.Second,
			OperationRetries: pool.OperationRetries{Attempts: 1}})
		if err == nil {
			t.Errorf("%s: a plain Pulsar connection was accepted (listeners: %v)", plain, addrs)
		}
		if code, ok := plainHTTP(hc, "http://"+a.String()+"/admin/v2/clusters", token); ok && code/100 == 2 {
			t.Errorf("http://%s: the admin API answers %d over plain HTTP", a, code)
		}
	}
	t.Logf("checked the %d listeners of process %d: %v", len(addrs), tg.pid, addrs)
}

// plainHTTP sends a GET and returns the status, or false when no HTTP
// answer came (refused, closed, not HTTP).
func plainHTTP(hc *http.Client, u, token string) (int, bool) {
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		return 0, false
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, false
	}
	resp.Body.Close()
	return resp.StatusCode, true
}

// portOf is the port of URL u.
func portOf(t *testing.T, u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Port() == "" {
		t.Fatalf("%q: no port", u)
	}
	return p.Port()
}
