package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"

	"github.com/streamrun/streamrun"
	"github.com/streamrun/streamrun/control"
	"github.com/streamrun/streamrun/subscribe"
)

// runFiles runs what c says through package streamrun and returns the
// exit status: the flags become streamrun.Options, the outcome an exit
// status and the lines on stdout.
func runFiles(ctx context.Context, c runConfig, cmd cmdIO, log *slog.Logger, stdout, stderr io.Writer) int {
	o := c.o
	o.Notices = stdout // the embedded broker's URLs
	o.Logger = log
	o.TelemetryAddr = c.telemetryAddr
	o.ReloadOnSIGHUP = true
	if c.input != "" {
		in := &streamrun.Input{Name: c.input, Topic: c.inputTopic, KeySeparator: c.keySep}
		if c.input == "-" {
			in.Name, in.Lines = "stdin", os.Stdin
		} else {
			f, err := os.Open(c.input)
			if err != nil {
				return cmd.fail(usagef("--input: %v", err))
			}
			defer f.Close()
			in.Lines = f
		}
		o.Input = in
	}
	var printed atomic.Int64
	if c.print {
		o.FinalOutputs = func(topic string, m *subscribe.Message) {
			short := strings.TrimPrefix(topic, "persistent://public/default/")
			if m.Key != "" {
				fmt.Fprintf(stdout, "%s [%s] %s\n", short, m.Key, m.Payload)
			} else {
				fmt.Fprintf(stdout, "%s %s\n", short, m.Payload)
			}
			printed.Add(1)
		}
	}

	r, err := streamrun.Start(ctx, o)
	var fe *streamrun.FilesError
	var oe *streamrun.OptionError
	switch {
	case errors.As(err, &fe):
		// FILE:LINE:COL: field: what is wrong, a line each, as validate.
		fmt.Fprintf(stderr, "%v\n%s: nothing started\n", fe, cmd.prefix())
		return exitUsage
	case errors.As(err, &oe):
		return cmd.fail(usagef("%s", optionMessage(oe)))
	case err != nil && interrupted(ctx):
		return cmd.interrupted()
	case err != nil:
		return cmd.fail(err)
	}
	ctl, err := control.ForRun(r, c.controlAddr, c.controlReadOnly, nil, control.Options{Logger: log.With("component", "control")})
	if err != nil {
		r.Stop()
		_ = r.Wait()
		return cmd.fail(usagef("control API: %v", err))
	}
	err = r.Wait()
	ctl.CloseQuietly()
	if c.input != "" && c.print {
		fmt.Fprintf(stdout, "streamrun: %d messages in, %d outputs printed\n", r.InputSent(), printed.Load())
	}
	if err != nil {
		return cmd.fail(err)
	}
	if interrupted(ctx) {
		return cmd.interrupted()
	}
	log.Info("stopped")
	return exitOK
}

// optionMessage says what is wrong with the flag behind a
// streamrun.OptionError.
func optionMessage(e *streamrun.OptionError) string {
	switch e.Field {
	case "Input":
		return fmt.Sprintf("--input: %v with --input-topic", e.Err)
	case "Input.Topic":
		return fmt.Sprintf("--input-topic %v", e.Err)
	}
	return e.Error()
}
