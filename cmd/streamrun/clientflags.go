package main

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
)

// clientFlags are the flags of every command that talks to a broker as a
// client (produce, consume): where it is, how to authenticate, and what
// bounds its waits.
type clientFlags struct {
	url            string
	token          string
	tlsCA          string
	tlsCert        string
	tlsKey         string
	tlsSkipHost    bool
	tlsInsecure    bool
	retries        int
	connectTimeout time.Duration
}

// register adds the flags to fs.
func (f *clientFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.url, "url", pool.DefaultServiceURL, "service URL: pulsar://host:port, pulsar+ssl://host:port, or a comma list of hosts")
	fs.StringVar(&f.token, "token", "", "auth token: "+secretFlagHelp)
	fs.StringVar(&f.tlsCA, "tls-ca", "", "PEM file of the CAs to trust for pulsar+ssl:// (default: the system's)")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "PEM client certificate")
	fs.StringVar(&f.tlsKey, "tls-key", "", "PEM key of the client certificate")
	fs.BoolVar(&f.tlsSkipHost, "tls-skip-hostname-verification", false, "accept a trusted certificate issued for another host name")
	fs.BoolVar(&f.tlsInsecure, "tls-insecure", false, "accept any certificate (tests only)")
	fs.IntVar(&f.retries, "retries", 0, `attempts for an operation the broker refuses "for now" (0: no limit, 5 s apart)`)
	fs.DurationVar(&f.connectTimeout, "connect-timeout", 30*time.Second, "how long connecting to --url may take, retries included")
}

// options checks the flags and returns the client options they set; its
// errors are usage errors. log receives the client's own events; the
// retry lines go to notice.
func (f *clientFlags) options(log, notice *slog.Logger) (pool.Options, error) {
	switch {
	case f.retries < 0:
		return pool.Options{}, usagef("--retries must not be negative, got %d", f.retries)
	case f.connectTimeout <= 0:
		return pool.Options{}, usagef("--connect-timeout must be positive, got %s", f.connectTimeout)
	case (f.tlsCert == "") != (f.tlsKey == ""):
		return pool.Options{}, usagef("--tls-cert and --tls-key go together")
	}
	if _, err := pulsarwire.ParseServiceURL(f.url); err != nil {
		return pool.Options{}, usagef("--url %q: %v", f.url, err)
	}
	if err := f.checkFiles(); err != nil {
		return pool.Options{}, err
	}
	return pool.Options{
		ServiceURL: f.url,
		Token:      f.token,
		TLS: pool.TLSOptions{
			CAFile: f.tlsCA, CertFile: f.tlsCert, KeyFile: f.tlsKey,
			SkipHostnameVerification: f.tlsSkipHost, InsecureSkipVerify: f.tlsInsecure,
		},
		OperationRetries: pool.OperationRetries{Attempts: f.retries},
		Logger:           log,
		OnRetry:          retryNotice(notice),
	}, nil
}

// checkFiles checks that the files and variables the flags name can be
// read, so that a wrong path is a usage error before anything is dialed.
func (f *clientFlags) checkFiles() error {
	for _, fl := range []struct{ name, path string }{{"--tls-ca", f.tlsCA}, {"--tls-cert", f.tlsCert}, {"--tls-key", f.tlsKey}} {
		if fl.path == "" {
			continue
		}
		if _, err := os.ReadFile(fl.path); err != nil {
			return usagef("%s: %v", fl.name, err)
		}
	}
	if err := checkSecretSpec("--token", f.token); err != nil {
		return err
	}
	return nil
}

// retryNotice returns the pool's OnRetry callback for a command: one line
// per retry at the default level, saying what failed, why, when the next
// attempt is, and that --retries bounds it.
func retryNotice(log *slog.Logger) func(pool.RetryEvent) {
	if log == nil {
		return nil
	}
	return func(e pool.RetryEvent) {
		of := "no limit; --retries N bounds them"
		if e.Limit > 0 {
			of = fmt.Sprintf("%d of %d, set by --retries", e.Attempt, e.Limit)
		}
		log.Info(fmt.Sprintf("%s: attempt %d failed: %v; next attempt in %s (attempts: %s)", e.Op, e.Attempt, e.Err, e.Delay, of),
			"attempt", e.Attempt, "limit", e.Limit, "next_in", e.Delay.String())
	}
}
