package clientrun

import (
	"bytes"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/streamrun/streamrun/pool"
)

// Off a terminal each update due is a line of its own, with the total
// when known and failures when there are any; Finish repeats the last
// state. Updates before the interval, a quiet line, or one or no
// message known ahead write nothing, and then Finish writes nothing
// either.
func TestProgressLine(t *testing.T) {
	var buf bytes.Buffer
	p := NewProgressLine(&buf, false, 5)
	p.every = 0 // every update is due
	p.Update(pool.PublishResult{Sent: 3, Acked: 2})
	p.Finish(pool.PublishResult{Sent: 5, Acked: 4, Failed: 1})
	want := regexp.MustCompile(`^sent 3/5, acknowledged 2 \(\d+ msg/s\)\nsent 5/5, acknowledged 4 \(\d+ msg/s\), failed 1\n$`)
	if !want.MatchString(buf.String()) {
		t.Errorf("progress of 5:\n%q\nwant it to match %s", buf.String(), want)
	}

	buf.Reset()
	p = NewProgressLine(&buf, false, -1)
	p.every = 0
	p.Update(pool.PublishResult{Sent: 7, Acked: 7})
	if got := buf.String(); !regexp.MustCompile(`^sent 7, acknowledged 7 \(\d+ msg/s\)\n$`).MatchString(got) {
		t.Errorf("progress of lines not counted ahead: %q, want no total", got)
	}

	for _, c := range []struct {
		name  string
		quiet bool
		total int
		every time.Duration
	}{
		{"quiet", true, 100, 0},
		{"one message", false, 1, 0},
		{"no message", false, 0, 0},
		{"not yet due", false, 100, time.Hour},
	} {
		buf.Reset()
		p := NewProgressLine(&buf, c.quiet, c.total)
		p.every = c.every
		p.Update(pool.PublishResult{Sent: 1, Acked: 1})
		p.Finish(pool.PublishResult{Sent: 1, Failed: 1, FirstErr: errors.New("x")})
		if buf.Len() != 0 {
			t.Errorf("%s: wrote %q, want nothing", c.name, buf.String())
		}
	}
}
