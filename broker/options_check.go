package broker

import (
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/streamrun/streamrun/broker/auth"
)

// OptionError is an Options value Start refuses before anything listens
// or any file is opened. Msg names the fields it is about in braces, as
// Options spells them ("{TokenPublicKey}"), so that a command names its
// flags instead (Text).
type OptionError struct {
	Msg string
}

func (e *OptionError) Error() string {
	return "broker: " + e.Text(func(field string) string { return field })
}

// fieldRef is a field's name in an OptionError's Msg.
var fieldRef = regexp.MustCompile(`\{([A-Za-z]+)\}`)

// Text is the message with each field named by name(field).
func (e *OptionError) Text(name func(field string) string) string {
	return fieldRef.ReplaceAllStringFunc(e.Msg, func(ref string) string { return name(ref[1 : len(ref)-1]) })
}

// Check refuses, as an *OptionError, options that would not do what they
// say: an address that is not host:port, a certificate or key file that
// does not read, an advertised host with a port, nowhere for the data, nothing listening, HTTPS or a TLS port
// without a certificate, two token keys, a public key that is not one,
// authorization without authentication (every client would be
// anonymous), superusers without authorization (nothing would be denied
// to anyone else), negative connection limits. Start calls it.
func (o Options) Check() error {
	if err := o.checkAddresses(); err != nil {
		return err
	}
	tls := o.TLSConfig != nil || o.TLSCertFile != "" && o.TLSKeyFile != ""
	authn := len(o.TokenSecretKey) > 0 || len(o.TokenPublicKey) > 0 || o.Authenticate != nil
	checks := []struct {
		bad bool
		msg string
	}{
		{!o.Memory && o.DataDir == "", "no {DataDir} and not {Memory}: say where the data goes"},
		{o.TLSConfig == nil && (o.TLSCertFile == "") != (o.TLSKeyFile == ""), "{TLSCertFile} and {TLSKeyFile} go together"},
		{o.Listen == "-" && !tls, "{Listen} - turns the plain port off: give {TLSCertFile} and {TLSKeyFile}, or nothing listens"},
		{o.HTTPS != "" && !tls, "{HTTPS} needs {TLSCertFile} and {TLSKeyFile}"},
		{len(o.TokenSecretKey) > 0 && len(o.TokenPublicKey) > 0, "{TokenSecretKey} and {TokenPublicKey} exclude each other"},
		{o.Authorization && !authn, "{Authorization} needs {TokenSecretKey} or {TokenPublicKey}: without authentication every client is anonymous"},
		{len(o.SuperUserRoles) > 0 && !o.Authorization, "{SuperUserRoles} needs {Authorization}"},
		{o.MaxConnections < 0, fmt.Sprintf("{MaxConnections} must not be negative, got %d", o.MaxConnections)},
		{o.MaxConnectionsPerIP < 0, fmt.Sprintf("{MaxConnectionsPerIP} must not be negative, got %d", o.MaxConnectionsPerIP)},
	}
	for _, c := range checks {
		if c.bad {
			return &OptionError{Msg: c.msg}
		}
	}
	if len(o.TokenPublicKey) > 0 {
		if _, err := auth.ParsePublicKey(o.TokenPublicKey); err != nil {
			return &OptionError{Msg: fmt.Sprintf("{TokenPublicKey}: %v", err)}
		}
	}
	return nil
}

// checkAddresses refuses addresses Start could not listen on and files
// it could not read, so that the mistake is named before anything
// listens. An empty address is the default; "-" turns Listen or HTTP off.
func (o Options) checkAddresses() error {
	for _, a := range []struct{ field, addr string }{
		{"Listen", o.Listen}, {"TLSListen", o.TLSListen}, {"HTTP", o.HTTP}, {"HTTPS", o.HTTPS}, {"Pprof", o.Pprof},
	} {
		if a.addr == "" || a.addr == "-" && (a.field == "Listen" || a.field == "HTTP") {
			continue
		}
		if err := CheckAddress(a.addr); err != nil {
			return &OptionError{Msg: fmt.Sprintf("{%s} %q: %v", a.field, a.addr, err)}
		}
	}
	for _, f := range []struct{ field, path string }{{"TLSCertFile", o.TLSCertFile}, {"TLSKeyFile", o.TLSKeyFile}} {
		if f.path == "" {
			continue
		}
		if _, err := os.ReadFile(f.path); err != nil {
			return &OptionError{Msg: fmt.Sprintf("{%s}: %v", f.field, err)}
		}
	}
	if h := o.AdvertisedHost; strings.ContainsAny(h, ":/ ") && net.ParseIP(h) == nil {
		return &OptionError{Msg: fmt.Sprintf("{AdvertisedHost} %q: want a host name or IP address, without a port", h)}
	}
	return nil
}

// CheckAddress refuses an address to listen on that is not host:port
// with a port from 0 (a free port) to 65535.
func CheckAddress(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want host:port, e.g. 127.0.0.1:6650 (port 0: a free port)")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	return nil
}
