package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/streamrun/streamrun/broker"
)

func runBroker(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newCmd("broker", stdout, stderr)
	fs := pflag.NewFlagSet("streamrun broker", pflag.ContinueOnError)
	var lf logFlags
	var (
		listen    = fs.String("listen", "127.0.0.1:6650", "address of broker 0's Pulsar port (broker i: port+i; port 0: free ports)")
		httpAddr  = fs.String("http", "127.0.0.1:8080", `address of the admin REST API ("-": off)`)
		dataDir   = fs.String("data", "", "data directory (default "+broker.DefaultDataDir()+")")
		memory    = fs.Bool("memory", false, "keep everything in memory: nothing survives a stop")
		syncW     = fs.Bool("sync", false, "fsync every message before its receipt (survives a machine crash, not only kill -9)")
		retention = fs.Duration("retention", time.Minute, "how long messages no subscription needs are kept (acknowledged by all, or on a topic without subscriptions); -1s: keep everything")
		brokers   = fs.Int("brokers", 1, "number of brokers in this process, each owning a share of the topics")
		txns      = fs.Bool("transactions", false, "serve Pulsar transactions (Apache Pulsar's transactionCoordinatorEnabled; default off, as Pulsar's)")
		tlsCert   = fs.String("tls-cert", "", "TLS certificate file (PEM): also serve pulsar+ssl://")
		tlsKey    = fs.String("tls-key", "", "TLS private key file (PEM)")
		tlsListen = fs.String("tls-listen", "127.0.0.1:6651", "address of broker 0's TLS port, with --tls-cert")
		httpsAddr = fs.String("https", "", `address of the admin REST API over TLS, with --tls-cert (default: off)`)
		logLevel  = fs.String("log-level", "info", "log level: debug, info, warn or error (-v: debug)")
		faultAPI  = fs.Bool("fault-api", false, "serve the fault-injection routes under /admin/v2/streamrun/ on the admin API, for fault campaigns (docs/reliability.md); only in a build with the faultapi tag, never on a broker that serves real work")
		advHost   = fs.String("advertised-host", "", "host put in service URLs and lookup answers (default: the listen host, or 127.0.0.1); set it to a name clients in other containers reach")
		pprofAddr = fs.String("pprof", "", `address to serve Go's profiler on (net/http/pprof under /debug/pprof/; default "": off), e.g. 127.0.0.1:6060`)
	)
	var sf securityFlags
	sf.register(fs)
	lf.register(fs, "log at debug level (same as --log-level debug)")
	limits := registerConnLimits(fs)
	if code, done := cmd.parse(fs, args, helpText("broker")); done {
		return code
	}
	if err := errors.Join(checkBrokerFlags(fs), limits.check()); err != nil {
		return cmd.fail(err)
	}
	switch {
	case *brokers < 1 || *brokers > 64:
		return cmd.fail(usagef("--brokers must be between 1 and 64, got %d", *brokers))
	case *retention == 0:
		return cmd.fail(usagef("--retention 0: want a duration such as 1m, or -1s to keep everything"))
	case *memory && *dataDir != "":
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
	opts := broker.Options{
		Listen:         *listen,
		AdvertisedHost: *advHost,
		HTTP:           *httpAddr,
		DataDir:        *dataDir,
		Memory:         *memory,
		Sync:           *syncW,
		Retention:      *retention,
		Brokers:        *brokers,
		Transactions:   *txns,
		TLSCertFile:    *tlsCert,
		TLSKeyFile:     *tlsKey,
		HTTPS:          *httpsAddr,
		Pprof:          *pprofAddr,
		Logger:         logger,
	}
	if err := sf.apply(&opts); err != nil {
		return cmd.fail(err)
	}
	if *faultAPI {
		if err := installFaultAPI(&opts); err != nil {
			return cmd.fail(err)
		}
	}
	limits.apply(&opts)
	if *tlsCert != "" {
		opts.TLSListen = *tlsListen
	}
	if !*memory && opts.DataDir == "" {
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

// checkBrokerFlags checks the addresses and arguments before anything
// listens.
func checkBrokerFlags(fs *pflag.FlagSet) error {
	if err := noArgs(fs); err != nil {
		return err
	}
	for _, name := range []string{"listen", "tls-listen", "http", "https", "pprof"} {
		v, _ := fs.GetString(name)
		if (name == "http" || name == "listen") && v == "-" || (name == "https" || name == "pprof") && v == "" {
			continue
		}
		if err := checkListen("--"+name, v); err != nil {
			return err
		}
	}
	for _, name := range []string{"tls-cert", "tls-key"} {
		if v, _ := fs.GetString(name); v != "" {
			if _, err := os.ReadFile(v); err != nil {
				return usagef("--%s: %v", name, err)
			}
		}
	}
	if h, _ := fs.GetString("advertised-host"); strings.ContainsAny(h, ":/ ") && net.ParseIP(h) == nil {
		return usagef("--advertised-host %q: want a host name or IP address, without a port", h)
	}
	return nil
}
