package control_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/streamrun/streamrun/control"
)

// The table of pipelines: a row each, the backlog "-" when not known,
// and the instances up of all.
func TestWritePipelines(t *testing.T) {
	backlog := int64(12)
	ps := []control.PipelineStatus{
		{Name: "orders", State: "healthy", Backlog: &backlog, Rates: control.Rates{Received: 10.25, Acked: 9.5},
			Counts:    control.Counts{InFlight: 3, Acked: 100, DeadLettered: 2},
			Instances: []control.InstanceStatus{{Up: true}, {Up: false}}},
		{Name: "audit", State: "paused"},
	}
	var b strings.Builder
	if err := control.WritePipelines(&b, ps); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "PIPELINE") {
		t.Fatalf("table:\n%s", b.String())
	}
	if got := strings.Fields(lines[1]); strings.Join(got, " ") != "orders healthy 10.2 9.5 12 3 100 2 1/2" {
		t.Errorf("orders row: %q", got)
	}
	if got := strings.Fields(lines[2]); strings.Join(got, " ") != "audit paused 0.0 0.0 - 0 0 0 0/0" {
		t.Errorf("audit row: %q", got)
	}
}

// A plan's text: a line a pipeline with its effects and fields, the
// settings that take a restart, and "applied".
func TestPlanWriteText(t *testing.T) {
	plan := control.Plan{
		Applied: true,
		Pipelines: []control.PipelineChange{
			{Pipeline: "orders", Action: "changed", Effects: []string{"handler"},
				Fields: []control.FieldChange{{Path: "handler.config", Reload: "handler"}}, Binary: true},
			{Pipeline: "audit", Action: "unchanged"},
		},
		Restart: []control.FieldChange{{Path: "control.http"}},
	}
	var b strings.Builder
	if err := plan.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := "orders: changed [handler]: handler.config (handler), the handler's binary\n" +
		"audit: unchanged\n" +
		"control.http: takes a restart (applying is refused)\n" +
		"applied\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// A tap event's line: time, kind, topic, key, trace, outcome, and the
// quoted payload, its size after a truncated one; a line that is not an
// event is an error.
func TestWriteTapLine(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 678e6, time.UTC)
	ev, _ := json.Marshal(map[string]any{"time": at, "kind": "output", "topic": "t-out", "key": "k1", "trace_id": "abc",
		"outcome": "acked", "payload": "hi\n", "truncated": true, "size": 4096})
	var b strings.Builder
	if err := control.WriteTapLine(&b, ev); err != nil {
		t.Fatal(err)
	}
	if want := "03:04:05.678 output t-out key=k1 trace=abc acked \"hi\\n\"… (4096 bytes)\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
	if err := control.WriteTapLine(&b, json.RawMessage(`[1]`)); err == nil {
		t.Error("an array was written as an event")
	}
}
