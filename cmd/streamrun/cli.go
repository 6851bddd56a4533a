package main

// The conventions every command follows, in one place:
//
//   - Exit status 0 done, 1 failed at run time, 2 bad usage (a flag value,
//     a missing or extra argument). A usage error prints one short line,
//     "streamrun CMD: what is wrong", then the one-line hint
//     "Run 'streamrun CMD --help' for usage." Nothing else.
//   - --help (and `streamrun help CMD`) prints the command's help to stdout
//     and exits 0.
//   - Logs go to stderr through log/slog: --log-format text|json, -v for
//     more. Results go to stdout.
//   - An interrupt (SIGINT, SIGTERM) is reported with the words of
//     interruptedMsg, whenever it comes.
//
// A command calls newCmd, parses with cmd.parse, returns cmd.fail(err)
// for any error (usagef for usage errors), and builds its logger with
// logFlags.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/pflag"
)

// Exit statuses.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

// interruptedMsg is how every command says that SIGINT or SIGTERM
// stopped it.
const interruptedMsg = "interrupted"

// usageError is a bad flag value or argument: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// usagef returns a usage error; the message says what is wrong and with
// which flag, without the command's prefix.
func usagef(format string, a ...any) error {
	return &usageError{fmt.Sprintf(format, a...)}
}

// isUsage reports whether err is a usage error.
func isUsage(err error) bool {
	var ue *usageError
	return errors.As(err, &ue)
}

// cmdIO is a running command: its name and where its output goes.
type cmdIO struct {
	name   string // e.g. "produce"
	stdout io.Writer
	stderr io.Writer
}

func newCmd(name string, stdout, stderr io.Writer) cmdIO {
	return cmdIO{name: name, stdout: stdout, stderr: stderr}
}

// prefix is what every error line of the command starts with.
func (c cmdIO) prefix() string { return "streamrun " + c.name }

// hint is the one line a usage error ends with.
func (c cmdIO) hint() string {
	return fmt.Sprintf("Run 'streamrun %s --help' for usage.", c.name)
}

// fail reports err on stderr in the one shape and returns the exit
// status: 2 with the hint for a usage error, 1 otherwise.
func (c cmdIO) fail(err error) int {
	fmt.Fprintf(c.stderr, "%s: %v\n", c.prefix(), err)
	if isUsage(err) {
		fmt.Fprintln(c.stderr, c.hint())
		return exitUsage
	}
	return exitFailed
}

// parse parses args into fs. help is the text above the flags. It returns
// (status, true) when the command must return status now: after --help
// (0) or a parse error (2, reported).
func (c cmdIO) parse(fs *pflag.FlagSet, args []string, help string) (int, bool) {
	fs.SetOutput(io.Discard) // errors are reported here, in one shape
	fs.Usage = func() {}
	err := fs.Parse(args)
	switch {
	case errors.Is(err, pflag.ErrHelp):
		fmt.Fprintf(c.stdout, "%s\nFlags:\n%s", strings.TrimRight(help, "\n")+"\n", fs.FlagUsages())
		return exitOK, true
	case err != nil:
		return c.fail(usagef("%v", err)), true
	}
	return 0, false
}

// noArgs refuses positional arguments for a command that takes none.
func noArgs(fs *pflag.FlagSet) error {
	if fs.NArg() > 0 {
		return usagef("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	return nil
}

// logFlags are the logging flags of every command.
type logFlags struct {
	format  string
	verbose bool
}

func (l *logFlags) register(fs *pflag.FlagSet, verboseHelp string) {
	fs.StringVar(&l.format, "log-format", "text", "log format on stderr: text or json")
	fs.BoolVarP(&l.verbose, "verbose", "v", false, verboseHelp)
}

// level is the level of the command's own log lines: Info, or Debug with -v.
func (l *logFlags) level() slog.Level {
	if l.verbose {
		return slog.LevelDebug
	}
	return slog.LevelInfo
}

// logger returns a logger writing to w at level; a bad --log-format is a
// usage error.
func (l *logFlags) logger(w io.Writer, level slog.Leveler) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: level}
	switch l.format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usagef("--log-format %q: want text or json", l.format)
}

// plural is "1 message", "2 messages", "3 entries": n with noun, made
// plural unless n is 1.
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if stem, ok := strings.CutSuffix(noun, "y"); ok && !strings.HasSuffix(stem, "e") && !strings.HasSuffix(stem, "a") && !strings.HasSuffix(stem, "o") {
		return fmt.Sprintf("%d %sies", n, stem)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// interrupted reports whether ctx ended because of SIGINT or SIGTERM (the
// context main gives every command).
func interrupted(ctx context.Context) bool {
	return ctx.Err() != nil
}

// printJSON writes v as indented JSON to w and returns the exit status.
func (c cmdIO) printJSON(w io.Writer, v any) int {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return c.fail(fmt.Errorf("write: %w", err))
	}
	return exitOK
}

// interrupted reports the interrupt on stderr in the one wording and
// returns 0: for a command whose normal end is an interrupt (broker,
// consume).
func (c cmdIO) interrupted() int {
	fmt.Fprintf(c.stderr, "%s: %s\n", c.prefix(), interruptedMsg)
	return exitOK
}
