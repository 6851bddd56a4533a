package main

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/streamrun/streamrun/pool"
)

// clientFlags are the flags of every command that talks to a broker as a
// client (produce, consume): where it is and how to authenticate.
type clientFlags struct {
	url         string
	token       string
	tlsCA       string
	tlsCert     string
	tlsKey      string
	tlsSkipHost bool
	tlsInsecure bool
	retries     int
}

// register adds the flags to fs; retriesHelp says what retrying means for
// the command.
func (f *clientFlags) register(fs *pflag.FlagSet, retriesHelp string) {
	fs.StringVar(&f.url, "url", pool.DefaultServiceURL, "service URL: pulsar://host:port, pulsar+ssl://host:port, or a comma list of hosts")
	fs.StringVar(&f.token, "token", "", `auth token: the token, "file:PATH" or "env:VAR"`)
	fs.StringVar(&f.tlsCA, "tls-ca", "", "PEM file of the CAs to trust for pulsar+ssl:// (default: the system's)")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "PEM client certificate")
	fs.StringVar(&f.tlsKey, "tls-key", "", "PEM key of the client certificate")
	fs.BoolVar(&f.tlsSkipHost, "tls-skip-hostname-verification", false, "accept a trusted certificate issued for another host name")
	fs.BoolVar(&f.tlsInsecure, "tls-insecure", false, "accept any certificate (tests only)")
	fs.IntVar(&f.retries, "retries", 0, retriesHelp)
}

// options checks the flags and returns the client options they set.
func (f *clientFlags) options() (pool.Options, error) {
	switch {
	case f.retries < 0:
		return pool.Options{}, fmt.Errorf("--retries must not be negative, got %d", f.retries)
	case (f.tlsCert == "") != (f.tlsKey == ""):
		return pool.Options{}, errors.New("--tls-cert and --tls-key go together")
	}
	return pool.Options{
		ServiceURL: f.url,
		Token:      f.token,
		TLS: pool.TLSOptions{
			CAFile: f.tlsCA, CertFile: f.tlsCert, KeyFile: f.tlsKey,
			SkipHostnameVerification: f.tlsSkipHost, InsecureSkipVerify: f.tlsInsecure,
		},
		OperationRetries: pool.OperationRetries{Attempts: f.retries},
	}, nil
}
