package host

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/streamrun/streamrun/plugin"
)

// A handler run in the host's process reports a panic as a plugin
// process's crash is reported, so the runtime treats both alike.
func TestALocalPanicIsACrashNamingTheMessage(t *testing.T) {
	h := plugin.MessageFunc(func(_ context.Context, m *plugin.Message) ([]plugin.Output, error) {
		if string(m.Payload) == "boom" {
			panic("boom")
		}
		return nil, nil
	})
	_, err := ProcessLocal(context.Background(), h, msgs("a", "b", "boom"))
	var crash *CrashError
	if !errors.As(err, &crash) || !errors.Is(err, ErrCrashed) || crash.Index != 2 || crash.MessageID != "7:2:-1:-1" ||
		crash.Panic != "boom" || crash.Stack == "" || crash.Plugin != "local" || crash.Pid != os.Getpid() {
		t.Fatalf("%v (%+v)", err, crash)
	}
	// A batch handler's panic names no message.
	_, err = ProcessLocal(context.Background(), plugin.HandlerFunc(func(context.Context, plugin.ResultWriter, []*plugin.Message) error {
		panic(errors.New("batch boom"))
	}), msgs("a"))
	if !errors.As(err, &crash) || crash.Index != -1 || crash.Panic != "batch boom" {
		t.Fatalf("%v (%+v)", err, crash)
	}
	// Without a panic, the results and the handler's own error pass through.
	res, err := ProcessLocal(context.Background(), h, msgs("a"))
	if err != nil || len(res) != 1 || res[0].Outcome != plugin.OutcomeAck {
		t.Fatalf("%v, %+v", err, res)
	}
}
