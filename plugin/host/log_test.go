package host

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// What a Python plugin writes to stderr outside its log records is
// gathered by traceback: each exception's (a chained one's introduced by
// its phrase, a syntax error's too) one ERROR record, the lines around
// them their own.
func TestPythonTracebacksAreOneRecordEach(t *testing.T) {
	first := `Traceback (most recent call last):
  File "/h.py", line 3, in load
    return json.loads(s)
ValueError: bad json`
	chained := `During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/h.py", line 9, in <module>
    load("x")
RuntimeError: cannot load`
	syntax := `  File "/h.py", line 2
    def f(
         ^
SyntaxError: '(' was never closed`
	stderr := "starting\n" + first + "\n\n" + chained + "\n" + `{"level":"WARN","msg":"from slog","n":1}` + "\n" + syntax + "\nafter\n"
	l, logger := newLogs()
	var tail stderrTail
	logStderr(context.Background(), logger, strings.NewReader(stderr), &tail)

	want := []string{
		"INFO starting stream=stderr",
		"ERROR plugin raised an exception it did not handle error=ValueError: bad json trace=" + first,
		"ERROR plugin raised an exception it did not handle error=RuntimeError: cannot load trace=" + chained,
		"WARN from slog n=1",
		"ERROR plugin raised an exception it did not handle error=SyntaxError: '(' was never closed trace=" + syntax,
		"INFO after stream=stderr",
	}
	if got := strings.TrimSuffix(l.String(), "\n"); got != strings.Join(want, "\n") {
		t.Errorf("records:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	quoted := tail.quote()
	if !strings.HasPrefix(quoted, "  starting\n  Traceback") || !strings.HasSuffix(quoted, "  SyntaxError: '(' was never closed\n  after") ||
		!strings.Contains(quoted, "  WARN from slog n=1\n") {
		t.Errorf("tail:\n%s", quoted)
	}

	// A traceback cut by the end of the pipe is logged all the same.
	l, logger = newLogs()
	logStderr(context.Background(), logger, strings.NewReader("Traceback (most recent call last):\n  File \"/h.py\", line 1"), nil)
	if l.Count("plugin raised an exception it did not handle", `line 1`) != 1 {
		t.Errorf("a cut traceback:\n%s", l)
	}
}

// The tail quotes at most tailLines lines: the newest entries, a long
// traceback by its end, a long Go trace by its start.
func TestTheStderrTailQuotesTheEndOfTracebacksAndTheStartOfTraces(t *testing.T) {
	frames := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "\n  frame %d", i)
		}
		return b.String()
	}
	var tail stderrTail
	for i := range 2 * tailEntries {
		tail.add(fmt.Sprintf("line %d", i), false)
	}
	if q := tail.quote(); strings.Contains(q, "line 7\n") || !strings.HasPrefix(q, "  line 8\n") || !strings.HasSuffix(q, "  line 15") {
		t.Errorf("the last %d entries, want:\n%s", tailEntries, q)
	}
	tail.add("Traceback (most recent call last):"+frames(50)+"\nKeyError: 'x'", true)
	q := tail.quote()
	lines := strings.Split(q, "\n")
	if len(lines) != tailLines || lines[0] != "  Traceback (most recent call last):" || lines[1] != "  ..." ||
		lines[len(lines)-1] != "  KeyError: 'x'" || lines[len(lines)-2] != "    frame 49" {
		t.Errorf("a long traceback:\n%s", q)
	}
	tail = stderrTail{}
	tail.add("panic: boom"+frames(50), false)
	tail.add(strings.Repeat("é", tailLineBytes), false)
	lines = strings.Split(tail.quote(), "\n")
	if len(lines) != tailLines || lines[0] != "  panic: boom" || lines[tailLines-2] != "  ..." ||
		lines[tailLines-1] != "  "+strings.Repeat("é", tailLineBytes/2)+"..." {
		t.Errorf("a long trace, then a long line:\n%s", strings.Join(lines, "\n"))
	}
	if (*stderrTail)(nil).quote() != "" || new(stderrTail).quote() != "" {
		t.Error("an empty tail quotes something")
	}
}
