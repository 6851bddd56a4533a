package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/streamrun/streamrun/internal/benchrun"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/subscribe"
)

// benchFlags are the flags every bench subcommand shares: most go
// straight into the fields of benchrun.Options (o) that document them;
// the rest are this command's (output, progress) or are parsed into one.
type benchFlags struct {
	clientFlags
	logFlags
	o benchrun.Options

	adminURL  string
	subType   string
	position  string // consume
	guarantee string // pipeline
	config    string // pipeline
	output    string
	quiet     bool
	rounds    int // pipeline --state
}

// benchStateKeys is `bench pipeline --state`'s default --keys: as
// BenchmarkKeyedStateCounter (runtime/state_test.go) and issue #33's
// target, a per-key counter over 10 000 keys.
const benchStateKeys = 10000

// benchDefaults are the batching defaults, the same as pool's and
// Apache Pulsar's Java client's (1000 messages, 128 KiB, 10 ms).
const (
	benchBatchMessages = 1000
	benchBatchBytes    = 128 << 10
	benchBatchDelay    = 10 * time.Millisecond
)

// benchURLCap is how many messages a run against --url writes at most
// when neither --count nor --rate says how many: a cluster in use is not
// filled by a run that did not ask to (at the default 1 KiB, 100 000
// messages are about 98 MiB; at full speed a 10 s run writes millions).
const benchURLCap = 100000

func (f *benchFlags) register(fs *pflag.FlagSet, sub string) {
	f.clientFlags.register(fs)
	u := fs.Lookup("url")
	u.Usage, u.DefValue = "service URL of the broker to measure (default: an embedded broker started in this process)", ""
	f.logFlags.register(fs, "also log connections and reconnections")
	fs.StringVar(&f.adminURL, "admin-url", "http://127.0.0.1:8080", "admin REST API of --url's cluster, to create a partitioned topic (--partitions > 1); with --token, and --tls-ca for https://")
	fs.BoolVar(&f.o.Memory, "memory", false, "embedded broker: keep messages in memory only")
	fs.BoolVar(&f.o.Sync, "sync", false, "embedded broker: fsync every message before its receipt")
	fs.StringVarP(&f.o.Topic, "topic", "t", "", "topic (default: a new one, bench-<time>, deleted at the end against --url)")
	fs.BoolVar(&f.o.KeepTopics, "keep-topic", false, "against --url: keep the topics the run named itself (default: deleted at the end)")
	fs.IntVar(&f.o.Partitions, "partitions", 1, "partitions of each new topic (1: not partitioned)")
	fs.IntVar(&f.o.Size, "size", 1024, "message size in bytes")
	fs.Float64VarP(&f.o.Rate, "rate", "r", 0, "messages per second to publish (0: as fast as receipts allow; against --url, given: no cap on the messages)")
	fs.Int64VarP(&f.o.Count, "count", "n", 0, "messages to publish (0: for --duration; against --url, at most "+strconv.Itoa(benchURLCap)+" unless --count or --rate is given)")
	fs.DurationVarP(&f.o.Duration, "duration", "d", 0, "how long to publish, when --count is not given (default 10s)")
	fs.IntVar(&f.o.Keys, "keys", 0, "number of distinct keys, given round-robin (0: no key)")
	fs.BoolVar(&f.o.Producer.Batching.Disabled, "no-batching", false, "publish every message as an entry of its own")
	fs.IntVar(&f.o.Producer.Batching.MaxMessages, "batch-max-messages", benchBatchMessages, "most messages in a batch")
	fs.IntVar(&f.o.Producer.Batching.MaxBytes, "batch-max-bytes", benchBatchBytes, "most bytes in a batch")
	fs.DurationVar(&f.o.Producer.Batching.MaxDelay, "batch-max-delay", benchBatchDelay, "longest a batch waits for more messages")
	fs.IntVar(&f.o.Producer.MaxPendingMessages, "max-pending", 10000, "most messages published and not yet receipted")
	fs.StringVarP(&f.output, "output", "o", "text", "summary format: text or json")
	fs.DurationVar(&f.o.ProgressEvery, "progress", time.Second, "progress line interval on stderr (0: none)")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "no progress line (as --progress 0)")
	fs.DurationVar(&f.o.CloseTimeout, "close-timeout", 30*time.Second, "how long closing may take at the end")
	if sub != "pipeline" {
		fs.IntVar(&f.o.Topics, "topics", 1, "spread the messages round-robin over this many topics, TOPIC-0 to TOPIC-(N-1)")
	}
	if sub == "produce" {
		return
	}
	fs.StringVarP(&f.o.Subscription, "subscription", "s", "bench", "subscription name")
	fs.StringVar(&f.subType, "subscription-type", "shared", "subscription type: shared, exclusive, failover or key_shared")
	fs.IntVar(&f.o.ReceiverQueue, "receiver-queue", subscribe.DefaultReceiverQueue, "messages the broker may send ahead")
	fs.DurationVar(&f.o.DrainTimeout, "drain-timeout", 60*time.Second, "how long, once publishing ended (without publishing: from the start), to wait for the last messages to arrive")
	if sub == "consume" {
		fs.BoolVar(&f.o.Produce, "produce", true, "publish the messages in this process (false: receive what another process publishes, e.g. `streamrun bench produce`)")
		fs.StringVar(&f.position, "position", "latest", "where a new subscription starts: latest or earliest")
		fs.BoolVar(&f.o.Pattern, "pattern", false, "subscribe to the --topics by a pattern, TOPIC-[0-9]+, not by their names")
		return
	}
	fs.BoolVar(&f.o.Handler.InProcess, "in-process", false, "run the identity handler in this process, not as a plugin")
	fs.BoolVar(&f.o.Handler.Steps, "steps", false, "no handler: a filter, a map and a route step in this process (pipeline)")
	fs.StringVar(&f.o.Handler.Plugin, "plugin", "", `handler plugin binary (e.g. examples/plugins/uppercase built); its config is --config`)
	fs.StringVar(&f.o.Handler.Package, "package", "", "handler as a Go package, built once (e.g. ./examples/plugins/uppercase); its config is --config")
	fs.StringVar(&f.config, "config", "", `the handler's config, a JSON object or @FILE holding one; "{output}" in a string becomes the output topic, which the handler must publish to (default {"output": "{output}"})`)
	fs.IntVar(&f.o.Handler.BatchSize, "batch-size", 100, "most messages in a batch to the handler")
	fs.IntVar(&f.o.Handler.Instances, "instances", 1, "handler instances")
	fs.IntVar(&f.o.Pipelines, "pipelines", 1, "pipelines in the host, each from TOPIC-i to TOPIC-i-out (with more than one)")
	fs.StringVar(&f.guarantee, "guarantee", "at_least_once", "the pipeline's guarantee: at_least_once or exactly_once (transactions; the embedded broker gets them on)")
	fs.DurationVar(&f.o.Handler.CommitInterval, "commit-interval", pipelines.DefaultCommitInterval, "with --guarantee exactly_once: how often the pipeline commits")
	fs.BoolVar(&f.o.Handler.State, "state", false, "keyed state: the handler counts each key's messages in it (--keys "+strconv.Itoa(benchStateKeys)+" and --subscription-type exclusive unless given), measured against the same pipeline without state, each on a broker and topics of its own; prints both and the ratios, and checks every key's count in the changelog")
	fs.IntVar(&f.rounds, "rounds", 1, "with --state: rounds of both sides, which goes first alternating; the ratios' median and range")
}

// benchOptionFlags are the flags behind the fields benchrun.Options.Check
// names.
var benchOptionFlags = map[string]string{
	"Size": "size", "Rate": "rate", "Count": "count", "Duration": "duration", "Partitions": "partitions",
	"Keys": "keys", "Topics": "topics", "Pattern": "pattern", "Pipelines": "pipelines", "Topic": "topic",
	"Producer.Batching.MaxMessages": "batch-max-messages", "Producer.Batching.MaxBytes": "batch-max-bytes",
	"Producer.Batching.MaxDelay": "batch-max-delay", "Producer.MaxPendingMessages": "max-pending",
	"ProgressEvery": "progress", "CloseTimeout": "close-timeout", "Memory": "memory", "Sync": "sync", "ServiceURL": "url",
	"Subscription": "subscription", "ReceiverQueue": "receiver-queue", "DrainTimeout": "drain-timeout",
	"Type": "subscription-type", "Produce": "produce", "Handler.Config": "config", "Handler.Plugin": "plugin",
	"Handler.Package": "package", "Handler.InProcess": "in-process", "Handler.Steps": "steps",
	"Handler.BatchSize": "batch-size", "Handler.CommitInterval": "commit-interval", "Handler.Instances": "instances",
	"Handler.State": "state",
}

// checkOptions is benchrun.Options.Check, its refusal a usage error
// naming the flags.
func checkOptions(o benchrun.Options, sub string) error {
	var oe *benchrun.OptionError
	if err := o.Check(benchrun.Kind(sub)); errors.As(err, &oe) {
		return usagef("%s", oe.Text(func(field string) string { return "--" + benchOptionFlags[field] }))
	} else if err != nil {
		return err
	}
	return nil
}

// runBench dispatches `streamrun bench SUB`.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newCmd("bench", stdout, stderr)
	if len(args) == 0 {
		return cmd.fail(usagef("give a subcommand: produce, consume or pipeline"))
	}
	switch args[0] {
	case "-h", "--help":
		fmt.Fprint(stdout, helpText("bench"))
		writeBenchFlags(stdout)
		return exitOK
	case "handler":
		return benchIdentityHandler()
	case "produce", "consume", "pipeline":
	default:
		return cmd.fail(usagef("unknown subcommand %q: want produce, consume or pipeline", args[0]))
	}
	sub := args[0]
	cmd = newCmd("bench "+sub, stdout, stderr)
	fs := pflag.NewFlagSet("streamrun bench "+sub, pflag.ContinueOnError)
	var f benchFlags
	f.register(fs, sub)
	if code, done := cmd.parse(fs, args[1:], helpText("bench")); done {
		return code
	}
	if err := noArgs(fs); err != nil {
		return cmd.fail(err)
	}
	if f.quiet {
		f.o.ProgressEvery = 0
	}
	if err := f.stateDefaults(fs); err != nil {
		return cmd.fail(err)
	}
	urlSet := fs.Changed("url")
	o, err := f.options(cmd, sub, urlSet)
	if err == nil {
		err = checkOptions(o, sub)
	}
	if err != nil {
		return cmd.fail(err)
	}
	if writes := sub != "consume" || o.Produce; urlSet && writes && !fs.Changed("count") && !fs.Changed("rate") {
		o.CountCap = benchURLCap
	}
	if o.Handler.State {
		c, cerr := benchrun.RunCompare(ctx, o, f.rounds)
		if len(c.Rounds) > 0 {
			if werr := f.write(cmd, c); werr != nil && cerr == nil {
				cerr = werr
			}
		}
		err = cerr
	} else {
		res, rerr := benchrun.Run(ctx, benchrun.Kind(sub), o)
		if res != nil {
			if werr := f.write(cmd, res); werr != nil && rerr == nil {
				rerr = werr
			}
		}
		err = rerr
	}
	switch {
	case err != nil && interrupted(ctx):
		return cmd.fail(fmt.Errorf("%s: %w", interruptedMsg, err))
	case err != nil:
		return cmd.fail(adminUsage(err))
	case interrupted(ctx):
		// The result printed is of the part that ran.
		return cmd.fail(errors.New(interruptedMsg))
	}
	return exitOK
}

// stateDefaults gives --state its defaults, --keys and
// --subscription-type, where they were not given, and refuses --rounds
// without it.
func (f *benchFlags) stateDefaults(fs *pflag.FlagSet) error {
	switch {
	case fs.Changed("rounds") && !f.o.Handler.State:
		return usagef("--rounds is for --state: the rounds of a comparison")
	case !f.o.Handler.State:
		return nil
	case f.rounds < 1:
		return usagef("--rounds must be at least 1, got %d", f.rounds)
	}
	if !fs.Changed("keys") {
		f.o.Keys = benchStateKeys
	}
	if !fs.Changed("subscription-type") {
		f.subType = "exclusive"
	}
	return nil
}

// options are the run the flags ask for; sub is the subcommand.
func (f *benchFlags) options(cmd cmdIO, sub string, urlSet bool) (benchrun.Options, error) {
	typ, err := subscribe.ParseType(f.subType)
	guarantee, gerr := pipelines.ParseGuarantee(f.guarantee)
	switch {
	case f.output != "text" && f.output != "json":
		return benchrun.Options{}, usagef("--output %q: want text or json", f.output)
	case sub != "produce" && err != nil:
		return benchrun.Options{}, usagef("--subscription-type: %v", err)
	case sub == "consume" && f.position != "latest" && f.position != "earliest":
		return benchrun.Options{}, usagef("--position %q: want latest or earliest", f.position)
	case sub == "pipeline" && gerr != nil:
		return benchrun.Options{}, usagef("--guarantee: %v", gerr)
	}
	clientLog, notice, err := f.loggers(cmd.stderr)
	if err != nil {
		return benchrun.Options{}, err
	}
	log, err := f.logger(cmd.stderr, slog.LevelWarn)
	if err != nil {
		return benchrun.Options{}, err
	}
	o := f.o
	if o.Partitions > 1 || urlSet && !o.KeepTopics { // the admin API creates or deletes the topics
		tok, err := readToken(f.token)
		if err != nil {
			return o, err
		}
		o.Admin.Token = tok
	}
	if o.Handler.Config, err = f.handlerConfig(); err != nil {
		return o, err
	}
	o.Client = func(url string) (pool.Options, error) {
		f.url = url
		c := f.conn(clientLog, notice, f.o.CloseTimeout)
		return c.Client, f.check(c)
	}
	o.ConnectTimeout = f.connectTimeout
	o.Logger = log
	o.Version = readVersion().String()
	o.Progress = cmd.stderr
	o.Admin.URL, o.Admin.CAFile, o.Admin.Timeout = f.adminURL, f.tlsCA, f.connectTimeout
	o.Earliest = f.position == "earliest"
	o.Handler.ExactlyOnce = guarantee == pipelines.ExactlyOnce
	if urlSet {
		o.ServiceURL = f.url
	} else if err := f.check(f.conn(clientLog, notice, f.o.CloseTimeout)); err != nil {
		return o, err // a bad flag is a usage error before a broker starts
	}
	if sub != "produce" {
		o.Type = typ
	}
	if sub == "pipeline" && !o.Handler.Steps && o.Handler.Plugin == "" && o.Handler.Package == "" {
		// streamrun itself serves the identity handler (`streamrun bench
		// handler`).
		exe, err := os.Executable()
		if err != nil {
			return o, fmt.Errorf("find streamrun's own binary for the identity handler: %w", err)
		}
		o.Handler.Identity = []string{exe, "bench", "handler"}
	}
	return o, nil
}

// handlerConfig is --config (benchrun.ParseHandlerConfig). Its errors
// are usage errors.
func (f *benchFlags) handlerConfig() (map[string]any, error) {
	cfg, err := benchrun.ParseHandlerConfig(f.config)
	if err != nil {
		return nil, usagef("--config: %v", err)
	}
	return cfg, nil
}

// write prints the result (a *benchrun.Result or *benchrun.Comparison)
// to stdout.
func (f *benchFlags) write(cmd cmdIO, r interface{ WriteText(io.Writer) error }) error {
	if f.output == "json" {
		if code := cmd.printJSON(cmd.stdout, r); code != exitOK {
			return fmt.Errorf("write the result")
		}
		return nil
	}
	return r.WriteText(cmd.stdout)
}

// benchIdentityHandler serves the identity handler as a plugin process:
// `streamrun bench handler`, started by `streamrun bench pipeline`.
func benchIdentityHandler() int {
	plugin.Serve(benchrun.IdentityHandler())
	return exitOK
}

// writeBenchFlags lists the flags of bench's subcommands, those they all
// take first, then those some of them take, each group under the names
// of the subcommands that take it.
func writeBenchFlags(w io.Writer) {
	subs := []string{"produce", "consume", "pipeline"}
	sets := map[string]*pflag.FlagSet{}
	for _, sub := range subs {
		fs := pflag.NewFlagSet(sub, pflag.ContinueOnError)
		var f benchFlags
		f.register(fs, sub)
		sets[sub] = fs
	}
	// Each flag under the subcommands that take it, in the order of the
	// subcommands' help: every one, then each pair, then each alone.
	groups := map[string]*pflag.FlagSet{}
	var order []string
	for _, sub := range subs {
		sets[sub].VisitAll(func(fl *pflag.Flag) {
			var takers []string
			for _, other := range subs {
				if sets[other].Lookup(fl.Name) != nil {
					takers = append(takers, other)
				}
			}
			key := strings.Join(takers, " and ")
			g := groups[key]
			if g == nil {
				g = pflag.NewFlagSet(key, pflag.ContinueOnError)
				groups[key] = g
				order = append(order, key)
			}
			if g.Lookup(fl.Name) == nil {
				g.AddFlag(fl)
			}
		})
	}
	slices.SortStableFunc(order, func(a, b string) int { return strings.Count(b, " and ") - strings.Count(a, " and ") })
	for _, key := range order {
		title := "Flags of " + key + ":"
		if strings.Count(key, " and ") == len(subs)-1 {
			title = "Flags of every subcommand:"
		}
		fmt.Fprintf(w, "\n%s\n%s", title, groups[key].FlagUsages())
	}
}
