package main

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/pflag"

	"github.com/streamrun/streamrun/internal/clientrun"
	"github.com/streamrun/streamrun/pool"
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

// clientOptionFlags are the flags behind the fields clientrun's Check
// methods name.
var clientOptionFlags = map[string]string{
	"Client.ServiceURL": "url", "Client.OperationRetries.Attempts": "retries", "ConnectTimeout": "connect-timeout", "CloseTimeout": "close-timeout",
	"Client.TLS.CAFile": "tls-ca", "Client.TLS.CertFile": "tls-cert", "Client.TLS.KeyFile": "tls-key",
	"Subscribe.Topics": "topic", "Subscribe.Pattern": "pattern", "Subscribe.Subscription": "subscription", "Subscribe.Rewind": "position",
	"Each.Count": "count", "Each.Idle": "idle-timeout", "Topic": "topic", "Rate": "rate",
	"Client.Producer.Batching.ByKey": "batch-by-key", "Client.Producer.Batching.Disabled": "no-batching",
}

// clientUsage is the error of a clientrun Check: a refusal as a usage
// error naming the flags, any other error as a usage error too.
func clientUsage(err error) error {
	var oe *clientrun.OptionError
	switch {
	case errors.As(err, &oe):
		return usagef("%s", oe.Text(func(field string) string { return "--" + clientOptionFlags[field] }))
	case err != nil:
		return usagef("%v", err)
	}
	return nil
}

// conn is the connection the flags set, closing within closeTimeout;
// check checks it. log receives the client's own events; the retry lines
// go to notice.
func (f *clientFlags) conn(log, notice *slog.Logger, closeTimeout time.Duration) clientrun.Conn {
	return clientrun.Conn{
		Client: pool.Options{
			ServiceURL: f.url,
			Token:      f.token,
			TLS: pool.TLSOptions{
				CAFile: f.tlsCA, CertFile: f.tlsCert, KeyFile: f.tlsKey,
				SkipHostnameVerification: f.tlsSkipHost, InsecureSkipVerify: f.tlsInsecure,
			},
			OperationRetries: pool.OperationRetries{Attempts: f.retries},
			Logger:           log,
			OnRetry:          retryNotice(notice),
		},
		ConnectTimeout: f.connectTimeout,
		CloseTimeout:   closeTimeout,
	}
}

// check is o.Check (clientrun's Conn, ConsumeOptions or ProduceOptions
// holding the connection of conn), then the command's own check of
// --token; its errors are usage errors.
func (f *clientFlags) check(o interface{ Check() error }) error {
	if err := clientUsage(o.Check()); err != nil {
		return err
	}
	return checkSecretSpec("--token", f.token)
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
