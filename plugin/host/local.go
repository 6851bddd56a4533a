package host

import (
	"context"
	"errors"
	"os"

	"github.com/streamrun/streamrun/plugin"
)

// ProcessLocal runs h over batch in the host's own process, with a plugin
// process's semantics (plugin.ProcessLocal), and reports a panic as a
// plugin process's crash is reported: a *CrashError (ErrCrashed) naming
// the message, with Plugin "local" and this process's pid. It is for a
// handler run without isolation.
func ProcessLocal(ctx context.Context, h plugin.Handler, batch []*plugin.Message) ([]plugin.Result, error) {
	res, err := plugin.ProcessLocal(ctx, h, batch)
	var p *plugin.PanicError
	if errors.As(err, &p) {
		return nil, &CrashError{Plugin: "local", Pid: os.Getpid(), Panic: p.Value, Stack: p.Stack,
			Index: p.Index, MessageID: p.MessageID}
	}
	return res, err
}

// ProcessLocalBatch is ProcessLocal for a batch in the caller's own form
// (Batch), made into plugin.Messages for the handler.
// A StateBatch's messages get its keyed state (plugin.AttachState).
func ProcessLocalBatch(ctx context.Context, h plugin.Handler, batch Batch) ([]plugin.Result, error) {
	msgs := pluginMessages(batch)
	if sb, ok := batch.(StateBatch); ok {
		plugin.AttachState(msgs, sb.State())
	}
	return ProcessLocal(ctx, h, msgs)
}
