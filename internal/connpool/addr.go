package connpool

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// ServiceURL is a parsed service URL: its scheme and hosts.
type ServiceURL struct {
	TLS   bool     // pulsar+ssl://
	Hosts []string // host:port
}

// ParseServiceURL reads pulsar://h1:p1,h2:p2 and pulsar+ssl://...; a
// host without a port gets the scheme's default.
func ParseServiceURL(s string) (ServiceURL, error) {
	var u ServiceURL
	scheme, rest, ok := strings.Cut(strings.TrimSpace(s), "://")
	if !ok {
		return u, fmt.Errorf("service URL %q: want pulsar://host:port or pulsar+ssl://host:port", s)
	}
	port := "6650"
	switch strings.ToLower(scheme) {
	case "pulsar":
	case "pulsar+ssl":
		u.TLS, port = true, "6651"
	default:
		return u, fmt.Errorf("service URL %q: scheme %q is not pulsar or pulsar+ssl", s, scheme)
	}
	rest = strings.TrimRight(rest, "/")
	if rest == "" {
		return u, fmt.Errorf("service URL %q: no host", s)
	}
	for _, h := range strings.Split(rest, ",") {
		h = strings.TrimSpace(h)
		if h == "" || strings.ContainsAny(h, "/?#@") {
			return u, fmt.Errorf("service URL %q: bad host %q", s, h)
		}
		hostPort, err := withPort(h, port)
		if err != nil {
			return u, fmt.Errorf("service URL %q: %w", s, err)
		}
		u.Hosts = append(u.Hosts, hostPort)
	}
	return u, nil
}

func withPort(h, port string) (string, error) {
	if host, p, err := net.SplitHostPort(h); err == nil {
		if n, err := strconv.Atoi(p); err != nil || n <= 0 || n > 65535 {
			return "", fmt.Errorf("host %q: bad port", h)
		}
		if host == "" {
			return "", fmt.Errorf("host %q: empty host name", h)
		}
		return h, nil
	}
	// No port, or an IPv6 literal in brackets without one.
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	return net.JoinHostPort(h, port), nil
}

// BrokerAddr reads a broker URL from a lookup answer: its host:port and
// whether it is a TLS listener.
func BrokerAddr(raw string) (hostPort string, isTLS bool, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", false, fmt.Errorf("broker URL %q: %w", raw, err)
	}
	switch u.Scheme {
	case "pulsar":
	case "pulsar+ssl":
		isTLS = true
	default:
		return "", false, fmt.Errorf("broker URL %q: scheme %q is not pulsar or pulsar+ssl", raw, u.Scheme)
	}
	if u.Host == "" {
		return "", false, fmt.Errorf("broker URL %q: no host", raw)
	}
	port := "6650"
	if isTLS {
		port = "6651"
	}
	hp, err := withPort(u.Host, port)
	if err != nil {
		return "", false, fmt.Errorf("broker URL %q: %w", raw, err)
	}
	return hp, isTLS, nil
}
