package pulsarwire

import (
	"errors"
	"fmt"
	"testing"
)

// A service URL's hosts with their ports, the scheme's default where
// none is given; what is not one is refused, an http:// URL as ErrHTTP.
func TestServiceURLs(t *testing.T) {
	good := []struct {
		in    string
		tls   bool
		hosts []string
	}{
		{"pulsar://localhost:6650", false, []string{"localhost:6650"}},
		{"pulsar://localhost", false, []string{"localhost:6650"}},
		{"pulsar+ssl://broker.example.com", true, []string{"broker.example.com:6651"}},
		{"pulsar://a:1,b:2,c", false, []string{"a:1", "b:2", "c:6650"}},
		{"pulsar://[::1]:6650/", false, []string{"[::1]:6650"}},
		{"pulsar://[::1]", false, []string{"[::1]:6650"}},
		{" PULSAR://h:7 ", false, []string{"h:7"}},
	}
	for _, g := range good {
		u, err := ParseServiceURL(g.in)
		if err != nil {
			t.Errorf("%q: %v", g.in, err)
			continue
		}
		if u.TLS != g.tls || fmt.Sprint(u.Hosts) != fmt.Sprint(g.hosts) {
			t.Errorf("%q: got %+v", g.in, u)
		}
	}
	for _, bad := range []string{"", "localhost:6650", "ftp://h:80", "pulsar://", "pulsar://h:99999", "pulsar://h:0", "pulsar://h:x",
		"pulsar://a,,b", "pulsar://user@h:1", "pulsar://:6650", "pulsar://[]", "pulsar://a b:1"} {
		if _, err := ParseServiceURL(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if _, err := ParseServiceURL("http://h:8080"); !errors.Is(err, ErrHTTP) {
		t.Errorf("an http:// URL: %v, want ErrHTTP", err)
	}
}
