package contract

import (
	"context"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// hclogAdapter sends go-plugin's own log lines to slog at DEBUG: they are
// about go-plugin's plumbing, and what matters of it (start, exit, crash)
// streamrun logs itself.
type hclogAdapter struct {
	l    *slog.Logger
	name string
	args []any
}

var _ hclog.Logger = (*hclogAdapter)(nil)

// NewHCLog is the go-plugin logger of either end, over l.
func NewHCLog(l *slog.Logger) hclog.Logger {
	return &hclogAdapter{l: l.With("component", "go-plugin")}
}

func (a *hclogAdapter) Log(_ hclog.Level, msg string, args ...any) {
	if !a.l.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	if a.name != "" {
		msg = a.name + ": " + msg
	}
	a.l.Debug(msg, append(append([]any(nil), a.args...), args...)...)
}

func (a *hclogAdapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }
func (a *hclogAdapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }
func (a *hclogAdapter) Info(msg string, args ...any)  { a.Log(hclog.Info, msg, args...) }
func (a *hclogAdapter) Warn(msg string, args ...any)  { a.Log(hclog.Warn, msg, args...) }
func (a *hclogAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }
func (a *hclogAdapter) IsTrace() bool                 { return false }
func (a *hclogAdapter) IsDebug() bool                 { return a.l.Enabled(context.Background(), slog.LevelDebug) }
func (a *hclogAdapter) IsInfo() bool                  { return a.IsDebug() }
func (a *hclogAdapter) IsWarn() bool                  { return a.IsDebug() }
func (a *hclogAdapter) IsError() bool                 { return a.IsDebug() }
func (a *hclogAdapter) ImpliedArgs() []any            { return a.args }
func (a *hclogAdapter) Name() string                  { return a.name }
func (a *hclogAdapter) SetLevel(hclog.Level)          {}

func (a *hclogAdapter) GetLevel() hclog.Level {
	if a.IsDebug() {
		return hclog.Debug
	}
	return hclog.Off
}

func (a *hclogAdapter) With(args ...any) hclog.Logger {
	return &hclogAdapter{l: a.l, name: a.name, args: append(append([]any(nil), a.args...), args...)}
}

func (a *hclogAdapter) Named(name string) hclog.Logger {
	if a.name != "" {
		name = a.name + "." + name
	}
	return &hclogAdapter{l: a.l, name: name, args: a.args}
}

func (a *hclogAdapter) ResetNamed(name string) hclog.Logger {
	return &hclogAdapter{l: a.l, name: name, args: a.args}
}

func (a *hclogAdapter) StandardLogger(*hclog.StandardLoggerOptions) *log.Logger {
	return slog.NewLogLogger(a.l.Handler(), slog.LevelDebug)
}

func (a *hclogAdapter) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return a.StandardLogger(nil).Writer()
}
