package connpool

import (
	"fmt"
	"net/url"

	"github.com/streamrun/streamrun/pulsarwire"
)

// ServiceURL is a parsed service URL: its scheme and hosts.
type ServiceURL = pulsarwire.ServiceURL

// ParseServiceURL reads a service URL (pulsarwire.ParseServiceURL); the
// error names it.
func ParseServiceURL(s string) (ServiceURL, error) {
	u, err := pulsarwire.ParseServiceURL(s)
	if err != nil {
		return u, fmt.Errorf("service URL %q: %w", s, err)
	}
	return u, nil
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
	su, err := pulsarwire.ParseServiceURL(u.Scheme + "://" + u.Host) // the default port of the scheme
	if err == nil && len(su.Hosts) != 1 {
		err = fmt.Errorf("%d hosts, want one", len(su.Hosts))
	}
	if err != nil {
		return "", false, fmt.Errorf("broker URL %q: %w", raw, err)
	}
	return su.Hosts[0], isTLS, nil
}
