package connpool

import (
	"fmt"
	"testing"
)

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
	for _, bad := range []string{"", "localhost:6650", "http://h:80", "pulsar://", "pulsar://h:99999", "pulsar://h:x", "pulsar://a,,b", "pulsar://user@h:1", "pulsar://:6650"} {
		if _, err := ParseServiceURL(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
