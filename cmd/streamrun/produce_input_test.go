package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// produce --input publishes each non-empty line of a file: as text, a
// key split off at --input-key-separator; and as the JSON lines consume
// --output json prints, so that a topic is replayed to another with its
// keys, properties, binary payloads and event times; --count caps the
// lines. Against Apache Pulsar too when STREAMRUN_PULSAR_URL is set.
func TestProduceInputPublishesEachLine(t *testing.T) {
	url := consumeTarget(t)
	dir := t.TempDir()
	src := fmt.Sprintf("persistent://public/default/input-src-%d", time.Now().UnixNano())
	text := filepath.Join(dir, "lines.txt")
	if err := os.WriteFile(text, []byte("a:first\n\nb:second:with a colon\nno key here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runArgs("produce", "--url", url, "-t", src, "--input", text, "--input-key-separator", ":", "-p", "from=file")
	if code != 0 || !strings.HasPrefix(out, "produced 3 messages to "+src+" from the lines of "+text) {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
	got := readTopic(t, url, src, 3)
	for i, want := range [][2]string{{"a", "first"}, {"b", "second:with a colon"}, {"", "no key here"}} {
		if m := got[i]; m.Key != want[0] || string(m.Payload) != want[1] || m.Properties["from"] != "file" {
			t.Errorf("message %d: key %q payload %q properties %v; want %q %q from=file", i, m.Key, m.Payload, m.Properties, want[0], want[1])
		}
	}

	// A line of JSON as consume prints it, and a replay of what consume
	// printed.
	jsonl := filepath.Join(dir, "messages.jsonl")
	if err := os.WriteFile(jsonl, []byte(`{"key":"k","properties":{"p":"1"},"payload_base64":"AP8=","event_time":"2026-01-02T03:04:05.006Z"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := runArgs("produce", "--url", url, "-t", src, "--input", jsonl, "--input-format", "json"); code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
	code, printed, errs := runArgs("consume", "--url", url, "-t", src, "-s", "replay", "--position", "earliest", "-n", "4", "-o", "json", "-q")
	if code != 0 || errs != "" {
		t.Fatalf("consume: exit %d, stderr %q", code, errs)
	}
	replayed := filepath.Join(dir, "replay.jsonl")
	if err := os.WriteFile(replayed, []byte(printed), 0o644); err != nil {
		t.Fatal(err)
	}
	dst := src + "-copy"
	if code, out, errs := runArgs("produce", "--url", url, "-t", dst, "--input", replayed, "--input-format", "json", "--count", "4"); code != 0 {
		t.Fatalf("replay: exit %d: %s%s", code, out, errs)
	}
	orig, cp := readTopic(t, url, src, 4), readTopic(t, url, dst, 4)
	for i := range orig {
		o, c := orig[i], cp[i]
		if o.Key != c.Key || string(o.Payload) != string(c.Payload) || fmt.Sprint(o.Properties) != fmt.Sprint(c.Properties) || !o.EventTime.Equal(c.EventTime) {
			t.Errorf("message %d replayed as key %q payload %q properties %v event time %v; was %q %q %v %v",
				i, c.Key, c.Payload, c.Properties, c.EventTime, o.Key, o.Payload, o.Properties, o.EventTime)
		}
	}
	if last := cp[3]; string(last.Payload) != "\x00\xff" || last.EventTime.UnixMilli() != time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC).UnixMilli() {
		t.Errorf("the binary message replayed as %q at %v", last.Payload, last.EventTime)
	}
}

// A line that is not what --input-format says stops the command, naming
// the line; the lines before it are published. Bad combinations of flags
// are usage errors.
func TestProduceInputRefusesBadLines(t *testing.T) {
	url := consumeTarget(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte("{\"payload\":\"ok\"}\n{\"paylod\":\"typo\"}\n{\"payload\":\"never\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	topic := fmt.Sprintf("persistent://public/default/input-bad-%d", time.Now().UnixNano())
	code, _, errs := runArgs("produce", "--url", url, "-t", topic, "--input", bad, "--input-format", "json")
	if code != 1 || !strings.Contains(errs, "line 2 of "+bad+`: want an object as consume --output json prints: json: unknown field "paylod" (1 message published before it)`) {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--input", bad, "-m", "x"}, "--input excludes --message and --size"},
		{[]string{"--input", bad, "--input-format", "yaml"}, `--input-format "yaml": want text or json`},
		{[]string{"--input", bad, "--input-format", "json", "--input-key-separator", ":"}, "--input-key-separator is for --input-format text"},
		{[]string{"-m", "x", "--input-format", "json"}, "--input-format is for --input"},
		{[]string{"--input", filepath.Join(dir, "missing")}, "--input: open "},
	} {
		code, _, errs := runArgs(append([]string{"produce", "--url", url, "-t", topic}, tc.args...)...)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errs, tc.want)
		}
	}
}

// consume --idle-timeout stops, with status 0, once no message came for
// that long: after the last message, or from the start when none came;
// -q leaves stderr to errors.
func TestConsumeStopsWhenIdle(t *testing.T) {
	url := consumeTarget(t)
	topic := fmt.Sprintf("persistent://public/default/idle-%d", time.Now().UnixNano())
	publishFor(t, url, topic, 3)
	code, out, errs := runArgs("consume", "--url", url, "-t", topic, "-s", "idle", "--position", "earliest", "--idle-timeout", "300ms")
	if code != 0 || strings.Count(out, "\n") != 3 || !strings.Contains(errs, "consumed 3 messages in ") ||
		!strings.Contains(errs, "stopped: no message for 300ms (--idle-timeout)") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	code, out, errs = runArgs("consume", "--url", url, "-t", topic, "-s", "idle", "--idle-timeout", "200ms", "-q")
	if code != 0 || out != "" || errs != "" {
		t.Fatalf("nothing left, -q: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, _, errs := runArgs("consume", "-t", topic, "-s", "idle", "--idle-timeout", "-1s"); code != 2 || !strings.Contains(errs, "--idle-timeout must not be negative") {
		t.Errorf("--idle-timeout -1s: exit %d, %q", code, errs)
	}
}
