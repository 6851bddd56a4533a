package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/streamrun/streamrun/admin"
	"github.com/streamrun/streamrun/pulsarwire"
)

// `streamrun topics`: topic administration over the admin REST API, the
// subset of Apache Pulsar's /admin/v2 that the embedded broker serves too,
// so the same commands work against both.

// topicsFlags are the flags of `streamrun topics`.
type topicsFlags struct {
	adminURL     string
	tlsCA        string
	token        string
	output       string
	timeout      time.Duration
	partitions   int
	force        bool
	subscription string
	to           string
}

func runTopics(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newCmd("topics", stdout, stderr)
	fs := pflag.NewFlagSet("streamrun topics", pflag.ContinueOnError)
	fs.SetInterspersed(true)
	var f topicsFlags
	fs.StringVar(&f.adminURL, "admin-url", "http://127.0.0.1:8080", "admin REST API: http://host:port or https://host:port")
	fs.StringVar(&f.token, "token", "", "auth token: "+secretFlagHelp)
	fs.StringVar(&f.tlsCA, "tls-ca", "", "PEM file of the CAs to trust for an https:// --admin-url (default: the system's)")
	fs.StringVarP(&f.output, "output", "o", "text", "text or json")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "how long each request may take")
	fs.IntVar(&f.partitions, "partitions", 0, "create: the number of partitions (0: not partitioned)")
	fs.BoolVar(&f.force, "force", false, "delete: even with producers or consumers connected")
	fs.StringVarP(&f.subscription, "subscription", "s", "", "reset-cursor: the subscription")
	fs.StringVar(&f.to, "to", "", "reset-cursor: earliest, latest, an RFC 3339 time, a duration ago (10m) or a message id ledger:entry:partition[:batch]")
	if code, done := cmd.parse(fs, args, helpText("topics")); done {
		return code
	}
	a, err := f.admin()
	if err != nil {
		return cmd.fail(err)
	}
	defer a.Close()
	sub := fs.Args()
	if len(sub) == 0 {
		return cmd.fail(usagef("give a subcommand: list, create, delete, stats, internal-stats, subscriptions, backlog or reset-cursor"))
	}
	op, ok := topicOps[sub[0]]
	if !ok {
		return cmd.fail(usagef("unknown subcommand %q", sub[0]))
	}
	if err := op.check(&f, fs, sub[1:]); err != nil {
		return cmd.fail(err)
	}
	if err := op.run(ctx, a, &f, sub[1:], stdout); err != nil {
		if interrupted(ctx) {
			return cmd.fail(errors.New(interruptedMsg))
		}
		return cmd.fail(err)
	}
	return exitOK
}

// topicOp is one subcommand: check validates its arguments and flags (usage
// errors), run does it.
type topicOp struct {
	check func(f *topicsFlags, fs *pflag.FlagSet, args []string) error
	run   func(ctx context.Context, a *admin.Client, f *topicsFlags, args []string, w io.Writer) error
}

var topicOps = map[string]topicOp{
	"list":           {checkList, runList},
	"create":         {checkTopicArg("create", "partitions"), runCreate},
	"delete":         {checkTopicArg("delete", "force"), runDelete},
	"stats":          {checkTopicArg("stats"), runStats},
	"internal-stats": {checkTopicArg("internal-stats"), runInternalStats},
	"subscriptions":  {checkTopicArg("subscriptions"), runSubscriptions},
	"backlog":        {checkTopicArg("backlog"), runBacklog},
	"reset-cursor":   {checkReset, runReset},
}

// subcommandFlags are the flags that belong to one subcommand only.
var subcommandFlags = map[string]string{"partitions": "create", "force": "delete", "subscription": "reset-cursor", "to": "reset-cursor"}

// onlyFlags refuses a subcommand's flag given to another.
func onlyFlags(fs *pflag.FlagSet, name string, allowed ...string) error {
	var err error
	fs.Visit(func(fl *pflag.Flag) {
		if owner, ok := subcommandFlags[fl.Name]; ok && owner != name && !slices.Contains(allowed, fl.Name) && err == nil {
			err = usagef("--%s belongs to topics %s, not %s", fl.Name, owner, name)
		}
	})
	return err
}

func checkList(f *topicsFlags, fs *pflag.FlagSet, args []string) error {
	if err := onlyFlags(fs, "list"); err != nil {
		return err
	}
	switch {
	case len(args) > 1:
		return usagef("list takes one namespace, got %s", strings.Join(args, " "))
	case len(args) == 1 && strings.Count(args[0], "/") != 1:
		return usagef("list %q: want TENANT/NAMESPACE, e.g. public/default", args[0])
	}
	return nil
}

func checkTopicArg(name string, allowed ...string) func(*topicsFlags, *pflag.FlagSet, []string) error {
	return func(f *topicsFlags, fs *pflag.FlagSet, args []string) error {
		if err := onlyFlags(fs, name, allowed...); err != nil {
			return err
		}
		if len(args) != 1 {
			return usagef("%s takes one TOPIC, got %d arguments", name, len(args))
		}
		if _, err := pulsarwire.ParseTopic(args[0]); err != nil {
			return usagef("%v", err)
		}
		if name == "create" && f.partitions < 0 {
			return usagef("--partitions must not be negative, got %d", f.partitions)
		}
		return nil
	}
}

func checkReset(f *topicsFlags, fs *pflag.FlagSet, args []string) error {
	if err := checkTopicArg("reset-cursor", "subscription", "to")(f, fs, args); err != nil {
		return err
	}
	switch {
	case f.subscription == "":
		return usagef("reset-cursor needs --subscription")
	case f.to == "":
		return usagef("reset-cursor needs --to earliest, latest, TIME or ID")
	}
	if _, err := admin.ParseResetTarget(f.to, time.Now()); err != nil {
		return usagef("--to %v", err)
	}
	return nil
}

// admin checks the shared flags and returns the client they describe.
func (f *topicsFlags) admin() (*admin.Client, error) {
	switch {
	case f.output != "text" && f.output != "json":
		return nil, usagef("--output %q: want text or json", f.output)
	case f.timeout <= 0:
		return nil, usagef("--timeout must be positive, got %s", f.timeout)
	}
	return newAdmin(f.adminURL, f.token, f.tlsCA, f.timeout)
}

func printResult(w io.Writer, f *topicsFlags, text string, v any) error {
	if f.output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	_, err := fmt.Fprintln(w, text)
	return err
}

// printRaw prints a server's JSON answer, indented, for --output json.
func printRaw(w io.Writer, b []byte) error {
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err := w.Write(out.Bytes())
	return err
}

func runList(ctx context.Context, a *admin.Client, f *topicsFlags, args []string, w io.Writer) error {
	ns := "public/default"
	if len(args) == 1 {
		ns = args[0]
	}
	out, err := a.Topics(ctx, ns)
	if err != nil {
		return err
	}
	return printList(w, f, out)
}

func printList(w io.Writer, f *topicsFlags, list []string) error {
	if f.output == "json" {
		return printResult(w, f, "", list)
	}
	for _, t := range list {
		fmt.Fprintln(w, t)
	}
	return nil
}

func runCreate(ctx context.Context, a *admin.Client, f *topicsFlags, args []string, w io.Writer) error {
	t := args[0]
	if err := a.CreateTopic(ctx, t, f.partitions); err != nil {
		return fmt.Errorf("create %s: %w", fullName(t), err)
	}
	text := "created " + fullName(t)
	if f.partitions > 0 {
		text += " with " + plural(int64(f.partitions), "partition")
	}
	return printResult(w, f, text, map[string]any{"created": fullName(t), "partitions": f.partitions})
}

func runDelete(ctx context.Context, a *admin.Client, f *topicsFlags, args []string, w io.Writer) error {
	t := args[0]
	n, err := a.DeleteTopic(ctx, t, f.force)
	if err != nil {
		return fmt.Errorf("delete %s: %w", fullName(t), err)
	}
	return printResult(w, f, "deleted "+fullName(t), map[string]any{"deleted": fullName(t), "partitions": n})
}

// fullName is a topic's full name (checked by the subcommand's check).
func fullName(topic string) string {
	t, _ := pulsarwire.ParseTopic(topic)
	return t.String()
}

func runStats(ctx context.Context, a *admin.Client, f *topicsFlags, args []string, w io.Writer) error {
	t := fullName(args[0])
	st, err := a.TopicStats(ctx, t)
	if err != nil {
		return fmt.Errorf("stats of %s: %w", t, err)
	}
	if f.output == "json" {
		return printRaw(w, st.Raw)
	}
	return st.WriteText(w, t)
}

func runInternalStats(ctx context.Context, a *admin.Client, f *topicsFlags, args []string, w io.Writer) error {
	t := fullName(args[0])
	st, err := a.InternalStats(ctx, t)
	if err != nil {
		return fmt.Errorf("internal stats of %s: %w", t, err)
	}
	if f.output == "json" {
		return printRaw(w, st.Raw)
	}
	return st.WriteText(w, t)
}

func runSubscriptions(ctx context.Context, a *admin.Client, f *topicsFlags, args []string, w io.Writer) error {
	t := fullName(args[0])
	subs, err := a.Subscriptions(ctx, t)
	if err != nil {
		return fmt.Errorf("subscriptions of %s: %w", t, err)
	}
	return printList(w, f, subs)
}

func runBacklog(ctx context.Context, a *admin.Client, f *topicsFlags, args []string, w io.Writer) error {
	t := fullName(args[0])
	st, err := a.TopicStats(ctx, t)
	if err != nil {
		return fmt.Errorf("backlog of %s: %w", t, err)
	}
	rows := st.Backlogs()
	if f.output == "json" {
		return printResult(w, f, "", rows)
	}
	return admin.WriteBacklogs(w, rows)
}

func runReset(ctx context.Context, a *admin.Client, f *topicsFlags, args []string, w io.Writer) error {
	t := fullName(args[0])
	to, _ := admin.ParseResetTarget(f.to, time.Now()) // checked
	if err := a.ResetCursor(ctx, t, f.subscription, to); err != nil {
		return fmt.Errorf("reset %s on %s: %w", f.subscription, t, err)
	}
	return printResult(w, f, fmt.Sprintf("reset %s on %s to %s", f.subscription, t, f.to),
		map[string]any{"topic": t, "subscription": f.subscription, "to": f.to})
}
