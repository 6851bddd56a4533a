package securitytest

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
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

// A token signed with the key, unexpired, with a subject connects; an
// expired one, one signed with another key, one that is not a JWT and no
// token at all are refused with AuthenticationError, on the binary port
// and on the admin API.
func TestTokenAuthentication(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
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
		bad := map[string]string{
			"expired":     brokertest.Token(t, tg.key, tg.super, time.Now().Add(-time.Minute)),
			"another key": brokertest.Token(t, brokertest.SecretKey(t), tg.super, time.Time{}),
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
// say; grants and revocations go through the admin API at Apache
// Pulsar's paths, and only a superuser may make them.
func TestNamespaceAuthorization(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
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
// refused too.
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
		req, _ := http.NewRequest("GET", byIP(tg.admin)+"/admin/v2/tenants", nil)
		if _, err := tg.httpsClient(t).Do(req); !errors.As(err, &hostname) {
			t.Fatalf("admin API by a name the certificate lacks: %v, want x509.HostnameError", err)
		}
	})
}

// TLS only: the embedded broker with its plain ports off serves no
// plain-text URL anywhere, and every connection is TLS.
func TestTLSOnly(t *testing.T) {
	tg := embeddedTarget(t)
	c := tg.embedded
	if u := c.ServiceURL(); u != "" {
		t.Fatalf("plain port on: %s", u)
	}
	if u := c.AdminURL(); u != "" {
		t.Fatalf("plain admin API on: %s", u)
	}
	ctx := brokertest.Context(t, time.Minute)
	cl, err := tg.client(t, ctx, tg.token(t, tg.super))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Publish(ctx, topic("public/default", "tlsonly"), pool.Message{Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	for _, ci := range c.Connections(0) {
		if !ci.TLS {
			t.Fatalf("a plain connection: %+v", ci)
		}
	}
	// Plain HTTP to the HTTPS port is not served.
	code, _ := adminAt(t, &http.Client{Timeout: 10 * time.Second}, "GET", strings.Replace(tg.admin, "https://", "http://", 1)+"/admin/v2/tenants", tg.token(t, tg.super), "")
	if code != http.StatusBadRequest {
		t.Fatalf("plain HTTP to the HTTPS port: %d, want 400", code)
	}
}
