package msglines_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/streamrun/streamrun/internal/msglines"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/subscribe"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Blank lines are skipped, the others come with their numbers (a
// CRLF line without its CR); a line
// longer than a message is an error naming the input and the line.
func TestLinesSkipBlanksAndNumberTheRest(t *testing.T) {
	ctx := context.Background()
	l := msglines.Read(ctx, "in.txt", strings.NewReader("a\n\n  \nk:b\r\n"))
	var got []string
	for {
		line, ok, err := l.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got = append(got, string(rune('0'+line.N))+"="+string(line.Text))
	}
	if strings.Join(got, "|") != "1=a|4=k:b" {
		t.Errorf("lines %q", got)
	}
	long := msglines.Read(ctx, "big.txt", io.MultiReader(strings.NewReader("ok\n"), bytes.NewReader(make([]byte, msglines.MaxLine+1))))
	if _, ok, _ := long.Next(ctx); !ok {
		t.Fatal("the first line did not come")
	}
	if _, ok, err := long.Next(ctx); ok || err == nil || !strings.Contains(err.Error(), "read big.txt (line 2)") {
		t.Errorf("a line longer than a message: ok %v, err %v", ok, err)
	}
}

// An input that blocks does not hold up a reader whose context ended,
// and the reading goroutine ends (goleak) once its own context ends.
func TestLinesEndWithTheirContext(t *testing.T) {
	r, w := io.Pipe()
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	l := msglines.Read(ctx, "stdin", r)
	next, stop := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer stop()
	if _, ok, err := l.Next(next); ok || err != nil {
		t.Errorf("Next on a blocked input after its context: %v %v", ok, err)
	}
	cancel()
	go w.Write([]byte("late\n")) // the goroutine sees its context at its next line
	if _, ok, err := l.Next(context.Background()); ok || err != nil {
		t.Errorf("Next once Read's context ended: %v %v, want the end", ok, err)
	}
}

// A text line is the payload, or a key and the payload at the separator;
// what consume prints as JSON, produce reads back as the same message,
// the template's properties kept unless the line gives its own.
func TestWhatTheWriterPrintsTheDecoderReadsBack(t *testing.T) {
	tmpl := pool.Message{Key: "default", Properties: map[string]string{"from": "flag", "p": "flag"}}
	text := msglines.Decoder{KeySeparator: ":", Template: tmpl}
	if m, _ := text.Message([]byte("k1:a:b")); m.Key != "k1" || string(m.Payload) != "a:b" {
		t.Errorf("key and payload: %q %q", m.Key, m.Payload)
	}
	if m, _ := text.Message([]byte("plain")); m.Key != "default" || string(m.Payload) != "plain" {
		t.Errorf("no separator: %q %q", m.Key, m.Payload)
	}

	at := time.UnixMilli(1_700_000_000_123).UTC()
	sent := []*subscribe.Message{
		{ID: pulsarwire.MessageID{Ledger: 1, Entry: 2, Partition: -1, BatchIndex: -1}, Topic: "t", Key: "k", OrderingKey: "ok",
			Properties: map[string]string{"p": "line"}, Payload: []byte("text"), PublishTime: at, EventTime: at},
		{ID: pulsarwire.MessageID{Ledger: 1, Entry: 3, Partition: -1, BatchIndex: -1}, Topic: "t", Payload: []byte{0xff, 0, 1}, PublishTime: at},
	}
	var out bytes.Buffer
	w := msglines.NewWriter(&out, true)
	for _, m := range sent {
		if err := w.Write(m); err != nil {
			t.Fatal(err)
		}
	}
	js := msglines.Decoder{JSON: true, Template: tmpl}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("printed %q", out.String())
	}
	m, err := js.Message([]byte(lines[0]))
	if err != nil || m.Key != "k" || m.OrderingKey != "ok" || string(m.Payload) != "text" || !m.EventTime.Equal(at) ||
		m.Properties["p"] != "line" || m.Properties["from"] != "flag" || tmpl.Properties["p"] != "flag" {
		t.Errorf("read back %+v (%v), template %v", m, err, tmpl.Properties)
	}
	if m, err := js.Message([]byte(lines[1])); err != nil || !bytes.Equal(m.Payload, []byte{0xff, 0, 1}) || m.Key != "default" {
		t.Errorf("binary payload read back as %+v (%v)", m, err)
	}
	for _, bad := range []string{`{"payload":"a","payload_base64":"YQ=="}`, `{"nope":1}`, `{"payload":"a"} {}`, `not json`} {
		if _, err := js.Message([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// As text, a line names the id, the key quoted, the properties sorted
// and the payload quoted, so that a line is a message whatever its bytes.
func TestTheTextLine(t *testing.T) {
	var out bytes.Buffer
	m := &subscribe.Message{ID: pulsarwire.MessageID{Ledger: 1, Entry: 2, Partition: -1, BatchIndex: -1}, Key: "k",
		Properties: map[string]string{"b": "2", "a": "1"}, Payload: []byte("x\ny")}
	if err := msglines.NewWriter(&out, false).Write(m); err != nil {
		t.Fatal(err)
	}
	if want := m.ID.String() + ` key="k" properties=a=1,b=2 payload="x\ny"` + "\n"; out.String() != want {
		t.Errorf("%q, want %q", out.String(), want)
	}
}

// Messages decodes each line with the template's fields, stops at its
// limit, and names the line and input a bad line is on.
func TestMessagesDecodeLinesUpToTheLimit(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // the reader of the line past the limit
	dec := msglines.Decoder{KeySeparator: ":", Template: pool.Message{Properties: map[string]string{"p": "1"}}}
	next := dec.Messages(msglines.Read(ctx, "in.txt", strings.NewReader("k1:a\nb\nk3:c\n")), 2)
	var got []string
	for {
		m, ok, err := next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got = append(got, m.Key+"="+string(m.Payload)+"/"+m.Properties["p"])
	}
	if strings.Join(got, "|") != "k1=a/1|=b/1" {
		t.Errorf("messages %q, want the first two lines with the template's property", got)
	}
	js := msglines.Decoder{JSON: true}
	next = js.Messages(msglines.Read(ctx, "in.json", strings.NewReader("{\"payload\":\"x\"}\n\nnot json\n")), 0)
	if _, ok, err := next(ctx); !ok || err != nil {
		t.Fatalf("first line: %v %v", ok, err)
	}
	if _, ok, err := next(ctx); ok || err == nil || !strings.HasPrefix(err.Error(), "line 3 of in.json: ") {
		t.Errorf("a bad line: ok %v, err %v", ok, err)
	}
}
