package main

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/streamrun/streamrun/admin"
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
	tc := admin.TopicCommand{Partitions: f.partitions, Force: f.force, Subscription: f.subscription, To: f.to}
	if args := fs.Args(); len(args) > 0 {
		tc.Name, tc.Args = args[0], args[1:]
	}
	if err := admin.CheckTopicCommandName(tc.Name); err != nil {
		return cmd.fail(usagef("%v", err))
	}
	if err := onlyFlags(fs, tc.Name); err != nil {
		return cmd.fail(err)
	}
	if err := tc.Check(); err != nil {
		return cmd.fail(usagef("%v", err))
	}
	res, err := a.RunTopicCommand(ctx, tc)
	if err != nil {
		if interrupted(ctx) {
			return cmd.fail(errors.New(interruptedMsg))
		}
		return cmd.fail(err)
	}
	if f.output == "json" {
		err = res.WriteJSON(stdout)
	} else {
		err = res.WriteText(stdout)
	}
	if err != nil {
		return cmd.fail(err)
	}
	return exitOK
}

// subcommandFlags are the flags that belong to one subcommand only.
var subcommandFlags = map[string]string{"partitions": "create", "force": "delete", "subscription": "reset-cursor", "to": "reset-cursor"}

// onlyFlags refuses a subcommand's flag given to another.
func onlyFlags(fs *pflag.FlagSet, name string) error {
	var err error
	fs.Visit(func(fl *pflag.Flag) {
		if owner, ok := subcommandFlags[fl.Name]; ok && owner != name && err == nil {
			err = usagef("--%s belongs to topics %s, not %s", fl.Name, owner, name)
		}
	})
	return err
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
