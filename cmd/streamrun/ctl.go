package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/streamrun/streamrun/control"
)

func runCtl(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newCmd("ctl", stdout, stderr)
	fs := pflag.NewFlagSet("streamrun ctl", pflag.ContinueOnError)
	base := fs.String("url", "http://127.0.0.1:9470", "the control API's address")
	token := fs.String("token", "", "token for a control API that asks for one: "+secretFlagHelp)
	tlsCA := fs.String("tls-ca", "", "PEM file of the CAs to trust for an https:// --url (default: the system's)")
	timeout := fs.Duration("timeout", time.Minute, "how long each request may take")
	output := fs.StringP("output", "o", "text", "text or json")
	rate := fs.Float64P("rate", "r", 5, "tap: events per second at most")
	if code, done := cmd.parse(fs, args, helpText("ctl")); done {
		return code
	}
	if *output != "text" && *output != "json" {
		return cmd.fail(usagef("--output %q: want text or json", *output))
	}
	if _, err := url.ParseRequestURI(*base); err != nil {
		return cmd.fail(usagef("--url %q: %v", *base, err))
	}
	tok, hc, err := httpClient(*token, *tlsCA)
	if err != nil {
		return cmd.fail(err)
	}
	defer hc.CloseIdleConnections() // see httpClient
	c := &control.Client{URL: *base, Token: tok, HTTP: hc}
	a := fs.Args()
	if len(a) == 0 {
		return cmd.fail(usagef("a subcommand is needed: pipelines, pause, resume, dry-run, apply or tap"))
	}
	want := func(n int, what string) error {
		if len(a) != n+1 {
			return usagef("%s takes %s", a[0], what)
		}
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	var out any // what the server answered, printed as JSON with --output json
	var text func()
	switch a[0] {
	case "pipelines":
		if err := want(0, "no argument"); err != nil {
			return cmd.fail(err)
		}
		var ps []control.PipelineStatus
		ps, err = c.Pipelines(rctx)
		out, text = map[string]any{"pipelines": ps}, func() { _ = control.WritePipelines(stdout, ps) }
	case "pause", "resume":
		if err := want(1, "a pipeline's name"); err != nil {
			return cmd.fail(err)
		}
		var p control.PipelineStatus
		p, err = c.SetPaused(rctx, a[1], a[0] == "pause")
		out, text = p, func() { fmt.Fprintf(stdout, "%s: %s\n", p.Name, p.State) }
	case "dry-run", "apply":
		if err := want(1, "a pipeline file"); err != nil {
			return cmd.fail(err)
		}
		var plan control.Plan
		plan, err = c.ReloadFile(rctx, a[1], a[0] == "dry-run")
		if pe := (*os.PathError)(nil); errors.As(err, &pe) {
			return cmd.fail(usagef("%v", err))
		}
		out, text = plan, func() { _ = plan.WriteText(stdout) }
	case "tap":
		if err := want(1, "a pipeline's name"); err != nil {
			return cmd.fail(err)
		}
		cancel() // a tap lasts until interrupted
		err = c.Tap(ctx, a[1], *rate, func(e json.RawMessage) { printTapEvent(stdout, *output, e) })
		if err == nil && interrupted(ctx) {
			return cmd.interrupted()
		}
	default:
		return cmd.fail(usagef("unknown subcommand %q: want pipelines, pause, resume, dry-run, apply or tap", a[0]))
	}
	if err != nil {
		var se *control.StatusError
		if errors.As(err, &se) {
			fmt.Fprintf(stderr, "%s %s: %s\n", cmd.prefix(), a[0], se.Msg)
			for _, p := range se.Problems {
				fmt.Fprintln(stderr, p)
			}
			return exitFailed
		}
		return cmd.fail(err)
	}
	switch {
	case text == nil: // tap
	case *output == "json":
		return cmd.printJSON(stdout, out)
	default:
		text()
	}
	return exitOK
}

func printTapEvent(w io.Writer, output string, e json.RawMessage) {
	if output == "json" {
		fmt.Fprintf(w, "%s\n", e)
		return
	}
	_ = control.WriteTapLine(w, e)
}
