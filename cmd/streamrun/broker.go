package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/streamrun/streamrun/broker"
)

// defaultDataDir is where `streamrun broker` keeps data when neither
// --data nor --memory is given: <user cache dir>/streamrun/broker.
func defaultDataDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "streamrun", "broker")
}

func runBroker(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("streamrun broker", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		listen    = fs.String("listen", "127.0.0.1:6650", "address of broker 0's Pulsar port (broker i: port+i; port 0: free ports)")
		httpAddr  = fs.String("http", "127.0.0.1:8080", `address of the admin REST API ("-": off)`)
		dataDir   = fs.String("data", "", "data directory (default "+defaultDataDir()+")")
		memory    = fs.Bool("memory", false, "keep everything in memory: nothing survives a stop")
		syncW     = fs.Bool("sync", false, "fsync every message before its receipt (survives a machine crash, not only kill -9)")
		brokers   = fs.Int("brokers", 1, "number of brokers in this process, each owning a share of the topics")
		tlsCert   = fs.String("tls-cert", "", "TLS certificate file (PEM): also serve pulsar+ssl://")
		tlsKey    = fs.String("tls-key", "", "TLS private key file (PEM)")
		tlsListen = fs.String("tls-listen", "127.0.0.1:6651", "address of broker 0's TLS port, with --tls-cert")
		tokens    = fs.StringArray("token", nil, "a valid auth token (repeatable); any token flag turns token authentication on")
		tokenFile = fs.String("token-file", "", "file of valid auth tokens, one per line")
		logFormat = fs.String("log-format", "text", "log format: text or json")
		logLevel  = fs.String("log-level", "info", "log level: debug, info, warn or error")
		advHost   = fs.String("advertised-host", "", "host put in service URLs (default: the listen host, or 127.0.0.1)")
	)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: streamrun broker [flags]\n\n"+
			"Runs the embedded Apache Pulsar broker until SIGINT or SIGTERM. When it accepts\n"+
			"connections it prints one line to stdout:\n"+
			"  streamrun broker ready service_url=pulsar://127.0.0.1:6650 admin_url=http://127.0.0.1:8080 brokers=1 ...\n\n"+
			"Data goes to --data, or with neither --data nor --memory to\n  %s\n\nFlags:\n", defaultDataDir())
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "streamrun broker: %v\n", err)
		fs.Usage()
		return 2
	}
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "streamrun broker: "+format+"\n", a...)
		fs.Usage()
		return 2
	}
	if fs.NArg() > 0 {
		return bad("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if *brokers < 1 || *brokers > 64 {
		return bad("--brokers must be between 1 and 64, got %d", *brokers)
	}
	if *memory && *dataDir != "" {
		return bad("--memory and --data exclude each other")
	}
	if (*tlsCert == "") != (*tlsKey == "") {
		return bad("--tls-cert and --tls-key go together")
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return bad("--log-level %q: want debug, info, warn or error", *logLevel)
	}
	hopts := &slog.HandlerOptions{Level: level}
	var logger *slog.Logger
	switch *logFormat {
	case "text":
		logger = slog.New(slog.NewTextHandler(stderr, hopts))
	case "json":
		logger = slog.New(slog.NewJSONHandler(stderr, hopts))
	default:
		return bad("--log-format %q: want text or json", *logFormat)
	}
	toks := append([]string(nil), *tokens...)
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			return bad("--token-file: %v", err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				toks = append(toks, l)
			}
		}
		if len(toks) == 0 {
			return bad("--token-file %s holds no token", *tokenFile)
		}
	}
	opts := broker.Options{
		Listen:         *listen,
		AdvertisedHost: *advHost,
		HTTP:           *httpAddr,
		DataDir:        *dataDir,
		Memory:         *memory,
		Sync:           *syncW,
		Brokers:        *brokers,
		TLSCertFile:    *tlsCert,
		TLSKeyFile:     *tlsKey,
		Tokens:         toks,
		Logger:         logger,
	}
	if *tlsCert != "" {
		opts.TLSListen = *tlsListen
	}
	if !*memory && opts.DataDir == "" {
		opts.DataDir = defaultDataDir()
	}
	if opts.DataDir != "" {
		if err := os.MkdirAll(opts.DataDir, 0o755); err != nil {
			fmt.Fprintf(stderr, "streamrun broker: data directory: %v\n", err)
			return 1
		}
	}
	c, err := broker.Start(ctx, opts)
	if err != nil {
		fmt.Fprintf(stderr, "streamrun broker: %v\n", err)
		return 1
	}
	line := fmt.Sprintf("streamrun broker ready service_url=%s admin_url=%s brokers=%d", c.ServiceURL(), c.AdminURL(), *brokers)
	if u := c.ServiceURLTLS(); u != "" {
		line += " service_url_tls=" + u
	}
	if opts.Memory {
		line += " data=memory"
	} else {
		line += " data=" + opts.DataDir
	}
	fmt.Fprintln(stdout, line)
	<-ctx.Done()
	logger.Info("stopping broker")
	if err := c.Close(); err != nil {
		fmt.Fprintf(stderr, "streamrun broker: %v\n", err)
		return 1
	}
	return 0
}
