package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/pflag"

	"github.com/streamrun/streamrun/broker"
)

func runBroker(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newCmd("broker", stdout, stderr)
	fs := pflag.NewFlagSet("streamrun broker", pflag.ContinueOnError)
	var lf logFlags
	// The flags go straight into the fields of broker.Options that
	// document them; the rest are the command's.
	var opts broker.Options
	fs.StringVar(&opts.Listen, "listen", "127.0.0.1:6650", "address of broker 0's Pulsar port (broker i: port+i; port 0: free ports)")
	fs.StringVar(&opts.HTTP, "http", "127.0.0.1:8080", `address of the admin REST API ("-": off)`)
	fs.StringVar(&opts.DataDir, "data", "", "data directory (default "+broker.DefaultDataDir()+")")
	fs.BoolVar(&opts.Memory, "memory", false, "keep everything in memory: nothing survives a stop")
	fs.BoolVar(&opts.Sync, "sync", false, "fsync every message before its receipt (survives a machine crash, not only kill -9)")
	fs.DurationVar(&opts.Retention, "retention", time.Minute, "how long messages no subscription needs are kept (acknowledged by all, or on a topic without subscriptions); -1s: keep everything")
	fs.IntVar(&opts.Brokers, "brokers", 1, "number of brokers in this process, each owning a share of the topics")
	fs.BoolVar(&opts.Transactions, "transactions", false, "serve Pulsar transactions (Apache Pulsar's transactionCoordinatorEnabled; default off, as Pulsar's)")
	fs.StringVar(&opts.TLSCertFile, "tls-cert", "", "TLS certificate file (PEM): also serve pulsar+ssl://")
	fs.StringVar(&opts.TLSKeyFile, "tls-key", "", "TLS private key file (PEM)")
	tlsListen := fs.String("tls-listen", "127.0.0.1:6651", "address of broker 0's TLS port, with --tls-cert")
	fs.StringVar(&opts.HTTPS, "https", "", `address of the admin REST API over TLS, with --tls-cert (default: off)`)
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error (-v: debug)")
	faultAPI := fs.Bool("fault-api", false, "serve the fault-injection routes under /admin/v2/streamrun/ on the admin API, for fault campaigns (docs/reliability.md); only in a build with the faultapi tag, never on a broker that serves real work")
	fs.StringVar(&opts.AdvertisedHost, "advertised-host", "", "host put in service URLs and lookup answers (default: the listen host, or 127.0.0.1); set it to a name clients in other containers reach")
	fs.StringVar(&opts.Pprof, "pprof", "", `address to serve Go's profiler on (net/http/pprof under /debug/pprof/; default "": off), e.g. 127.0.0.1:6060`)
	var sf securityFlags
	sf.register(fs)
	lf.register(fs, "log at debug level (same as --log-level debug)")
	limits := registerConnLimits(fs)
	if code, done := cmd.parse(fs, args, helpText("broker")); done {
		return code
	}
	if err := errors.Join(noArgs(fs), checkCommandAddresses(opts, *tlsListen), limits.check()); err != nil {
		return cmd.fail(err)
	}
	switch {
	case opts.Brokers < 1 || opts.Brokers > 64:
		return cmd.fail(usagef("--brokers must be between 1 and 64, got %d", opts.Brokers))
	case opts.Retention == 0:
		return cmd.fail(usagef("--retention 0: want a duration such as 1m, or -1s to keep everything"))
	case opts.Memory && opts.DataDir != "":
		return cmd.fail(usagef("--memory and --data exclude each other"))
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return cmd.fail(usagef("--log-level %q: want debug, info, warn or error", *logLevel))
	}
	if lf.verbose {
		level = slog.LevelDebug
	}
	logger, err := lf.logger(stderr, level)
	if err != nil {
		return cmd.fail(err)
	}
	opts.Logger = logger
	if err := sf.apply(&opts); err != nil {
		return cmd.fail(err)
	}
	if *faultAPI {
		if err := installFaultAPI(&opts); err != nil {
			return cmd.fail(err)
		}
	}
	limits.apply(&opts)
	if opts.TLSCertFile != "" {
		opts.TLSListen = *tlsListen
	}
	if !opts.Memory && opts.DataDir == "" {
		opts.DataDir = broker.DefaultDataDir()
	}
	if err := checkBrokerOptions(opts); err != nil {
		return cmd.fail(err)
	}
	c, err := broker.Start(ctx, opts)
	if err != nil {
		if interrupted(ctx) {
			return cmd.fail(errors.New(interruptedMsg))
		}
		return cmd.fail(err)
	}
	fmt.Fprintln(stdout, c.ReadyLine())
	<-ctx.Done()
	cmd.interrupted()
	if err := c.Close(); err != nil {
		return cmd.fail(err)
	}
	return exitOK
}

// checkCommandAddresses refuses what broker.Options.Check lets through
// but a command line should not: an empty address (the library's
// default, here a mistake) and a bad --tls-listen without --tls-cert,
// which the options never see.
func checkCommandAddresses(o broker.Options, tlsListen string) error {
	for _, a := range []struct{ flag, addr string }{{"listen", o.Listen}, {"tls-listen", tlsListen}, {"http", o.HTTP}} {
		if a.addr != "" && a.flag != "tls-listen" {
			continue
		}
		if err := broker.CheckAddress(a.addr); err != nil {
			return usagef("--%s %q: %v", a.flag, a.addr, err)
		}
	}
	return nil
}
