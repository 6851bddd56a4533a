package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/streamrun/streamrun/internal/clientrun"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pulsarwire"
)

// stateFlags are the flags of `streamrun state`.
type stateFlags struct {
	clientFlags
	logFlags
	pipeline     string
	changelog    string
	closeTimeout time.Duration
}

func runState(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newCmd("state", stdout, stderr)
	fs := pflag.NewFlagSet("streamrun state", pflag.ContinueOnError)
	var f stateFlags
	f.clientFlags.register(fs)
	f.logFlags.register(fs, "also log connections and lookups")
	fs.StringVar(&f.pipeline, "pipeline", "", "the pipeline of FILE whose state to read (needed when several keep state)")
	fs.StringVar(&f.changelog, "changelog", "", "read this changelog topic instead of a file's")
	fs.DurationVar(&f.closeTimeout, "close-timeout", 30*time.Second, "how long closing may take at the end")
	if code, done := cmd.parse(fs, args, helpText("state")); done {
		return code
	}
	what, key, file, err := stateArgs(fs.Args(), f.changelog != "")
	if err != nil {
		return cmd.fail(err)
	}
	changelog := f.changelog
	if file != "" {
		if changelog, err = changelogOf(file, f.pipeline); err != nil {
			return cmd.fail(err)
		}
	} else if _, err := pulsarwire.ParseTopic(changelog); err != nil {
		return cmd.fail(usagef("--changelog: %v", err))
	}
	clientLog, notice, err := f.loggers(stderr)
	if err != nil {
		return cmd.fail(err)
	}
	conn := f.conn(clientLog, notice, f.closeTimeout)
	if err := f.check(conn); err != nil {
		return cmd.fail(err)
	}
	vals, err := clientrun.State(ctx, conn, changelog)
	if err != nil {
		if ctx.Err() != nil {
			return cmd.fail(fmt.Errorf("%s", interruptedMsg))
		}
		return cmd.fail(err)
	}
	return printState(cmd, what, key, vals)
}

// stateArgs reads the arguments: what to print, the key for get, and the
// file (none with --changelog).
func stateArgs(args []string, changelog bool) (what, key, file string, err error) {
	if len(args) == 0 {
		return "", "", "", usagef("say keys, get KEY or dump")
	}
	what, args = args[0], args[1:]
	switch what {
	case "keys", "dump":
	case "get":
		if len(args) == 0 {
			return "", "", "", usagef("get needs a KEY")
		}
		key, args = args[0], args[1:]
	default:
		return "", "", "", usagef("%q: say keys, get KEY or dump", what)
	}
	switch {
	case changelog && len(args) > 0:
		return "", "", "", usagef("a FILE and --changelog exclude each other")
	case !changelog && len(args) == 0:
		return "", "", "", usagef("give a pipeline FILE or --changelog TOPIC")
	case len(args) > 1:
		return "", "", "", usagef("unexpected arguments: %s", strings.Join(args[1:], " "))
	case len(args) == 1:
		file = args[0]
	}
	return what, key, file, nil
}

// changelogOf is the changelog topic of the pipeline of file that keeps
// state (pipelines.File.Stateful).
func changelogOf(file, name string) (string, error) {
	f, err := pipelines.Load(file, os.LookupEnv)
	if err != nil {
		return "", usagef("%v", err)
	}
	p, err := f.Stateful(name)
	if err != nil {
		hint := ""
		if errors.Is(err, pipelines.ErrSeveralStateful) {
			hint = " with --pipeline"
		}
		return "", usagef("%s %v%s", file, err, hint)
	}
	return p.ChangelogTopic(), nil
}

// printState prints what was asked for of vals.
func printState(cmd cmdIO, what, key string, vals map[string][]byte) int {
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	switch what {
	case "keys":
		for _, k := range keys {
			fmt.Fprintln(cmd.stdout, k)
		}
	case "get":
		v, ok := vals[key]
		if !ok {
			return cmd.fail(fmt.Errorf("key %q has no value", key))
		}
		_, _ = cmd.stdout.Write(v)
	case "dump":
		enc := json.NewEncoder(cmd.stdout)
		for _, k := range keys {
			_ = enc.Encode(struct {
				Key   string `json:"key"`
				Value string `json:"value"`
			}{k, string(vals[k])})
		}
	}
	return exitOK
}
