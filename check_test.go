package streamrun

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamrun/streamrun/pipelines"
)

// CheckHandlers starts each handler with its config, as a run's start
// would, without a broker: a typo in a handler's own config is reported
// at its key in the file, a handler that does not start at its program,
// and a handler that takes its config passes.
func TestCheckHandlersPlacesWhatAHandlerRefuses(t *testing.T) {
	dir := t.TempDir()
	uppercase, err := filepath.Abs("examples/plugins/uppercase")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "broken", "#!/bin/sh\necho 'cannot open /etc/handler.conf' >&2\nexit 3\n")
	if err := os.Chmod(filepath.Join(dir, "broken"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, dir, "p.yaml", `pipelines:
  - name: typo
    source: {topics: [in], subscription: s}
    handler:
      package: `+uppercase+`
      config:
        output: out
        smal: 3
  - name: fine
    source: {topics: [in], subscription: s}
    handler:
      package: `+uppercase+`
      config: {output: out}
  - name: broken
    source: {topics: [in], subscription: s}
    handler: {plugin: ./broken}
`)
	ctx := context.Background()
	f, err := Check(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = CheckHandlers(ctx, f, CheckHandlersOptions{HandlerCache: t.TempDir()})
	var errs pipelines.Errors
	if !errors.As(err, &errs) || len(errs) != 2 {
		t.Fatalf("CheckHandlers: %v, want two errors", err)
	}
	if got, want := errs[0].Error(), path+`:8:15: pipelines[0].handler.config.smal: the handler refuses its config: config: json: unknown field "smal"`; got != want {
		t.Errorf("the typo:\n%s\nwant\n%s", got, want)
	}
	if e := errs[1]; e.Line != 16 || e.Path != "pipelines[2].handler.plugin" ||
		!strings.HasPrefix(e.Msg, "the handler does not start: ") || !strings.Contains(e.Msg, "cannot open /etc/handler.conf") {
		t.Errorf("the handler that does not start: %v", e)
	}
	t.Log(err)
}

// quotedKey finds the one key of a config, at any depth, that a handler's
// words quote; none, or more than one, leaves the error at the config
// block.
func TestQuotedKeyFindsOneKeyTheHandlerNames(t *testing.T) {
	cfg := map[string]any{"output": "o", "db": map[string]any{"hots": "x", "port": 5}, "list": []any{map[string]any{"nmae": 1}}}
	for msg, want := range map[string]string{
		`json: unknown field "smal"`:                 "",
		`config: unknown field 'hots' for DB`:        "db.hots",
		"`nmae` is not a field":                      "list[0].nmae",
		`"output" and "port" conflict`:               "",
		`"output" is not a topic`:                    "output",
		`the handler needs a database (no db given)`: "",
	} {
		if got := quotedKey(cfg, msg); got != want {
			t.Errorf("quotedKey(%q) = %q, want %q", msg, got, want)
		}
	}
}

// The same for a Python handler on the SDK, whose config_as refuses an
// unknown key.
func TestCheckHandlersPlacesWhatAPythonHandlerRefuses(t *testing.T) {
	py := os.Getenv("STREAMRUN_PYTHON_SDK")
	if py == "" {
		t.Skip("STREAMRUN_PYTHON_SDK is not set: this test runs a Python handler and needs a Python with sdk/python installed " +
			"(STREAMRUN_PYTHON_SDK=$(scripts/python-sdk-env))")
	}
	enrich, err := filepath.Abs("examples/plugins/python/enrich/enrich.py")
	if err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, t.TempDir(), "p.yaml", `pipelines:
  - name: enrich
    source: {topics: [in], subscription: s}
    handler:
      script: `+enrich+`
      python: `+py+`
      config: {large: L, small: S, treshold: 5}
`)
	ctx := context.Background()
	f, err := Check(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = CheckHandlers(ctx, f, CheckHandlersOptions{})
	want := path + `:7:46: pipelines[0].handler.config.treshold: the handler refuses its config: TypeError: config: unknown field 'treshold'`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("CheckHandlers: %v\nwant %s", err, want)
	}
}
