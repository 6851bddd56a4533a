package pulsarwire

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// ServiceURL is a parsed service URL: its scheme and hosts.
type ServiceURL struct {
	TLS   bool     // pulsar+ssl://
	Hosts []string // host:port, with the scheme's default port when none was given
}

// ParseServiceURL reads pulsar://h1:p1,h2:p2 or pulsar+ssl://...
// (case and spaces around it and around each host ignored); a host
// without a port gets the scheme's default, 6650 or 6651. The error says
// what is wrong, without repeating s: an http:// URL is ErrHTTP (the
// admin API's address given for the service's).
func ParseServiceURL(s string) (ServiceURL, error) {
	var u ServiceURL
	scheme, rest, ok := strings.Cut(strings.TrimSpace(s), "://")
	if !ok {
		return u, errors.New("want pulsar://host:port or pulsar+ssl://host:port")
	}
	port := "6650"
	switch strings.ToLower(scheme) {
	case "pulsar":
	case "pulsar+ssl":
		u.TLS, port = true, "6651"
	case "http", "https":
		return u, fmt.Errorf("%w (the service URL is pulsar://host:6650, usually)", ErrHTTP)
	default:
		return u, fmt.Errorf("scheme %q: want pulsar:// or pulsar+ssl://", scheme)
	}
	rest = strings.TrimRight(rest, "/")
	if rest == "" {
		return u, errors.New("no host")
	}
	for _, h := range strings.Split(rest, ",") {
		h = strings.TrimSpace(h)
		if h == "" || strings.ContainsAny(h, "/?#@ ") {
			return u, fmt.Errorf("host %q: want host or host:port", h)
		}
		hostPort, err := withPort(h, port)
		if err != nil {
			return u, err
		}
		u.Hosts = append(u.Hosts, hostPort)
	}
	return u, nil
}

// withPort is h with port added when it has none.
func withPort(h, port string) (string, error) {
	host, p, err := net.SplitHostPort(h)
	if err != nil {
		// No port, or an IPv6 literal in brackets without one.
		host = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
		if host == "" {
			return "", fmt.Errorf("host %q: no host name", h)
		}
		return net.JoinHostPort(host, port), nil
	}
	if host == "" {
		return "", fmt.Errorf("host %q: no host name", h)
	}
	if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("host %q: port %q is not a number from 1 to 65535", h, p)
	}
	return h, nil
}
