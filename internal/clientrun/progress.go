package clientrun

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/streamrun/streamrun/pool"
)

// ProgressLine shows how publishing goes as one status line: sent (of
// how many), acknowledged, the rate since the start, failures. On a
// terminal it is rewritten in place every 200ms; to anything else a
// line goes once a second, so that a log stays readable.
type ProgressLine struct {
	w       io.Writer
	quiet   bool
	tty     bool
	total   int
	start   time.Time
	last    time.Time
	every   time.Duration
	printed bool
}

// NewProgressLine is the progress of total messages (-1: not known
// ahead) written to w. quiet, or fewer than 2 messages known ahead,
// writes nothing.
func NewProgressLine(w io.Writer, quiet bool, total int) *ProgressLine {
	p := &ProgressLine{w: w, quiet: quiet || total >= 0 && total < 2, total: total, start: time.Now(), every: time.Second}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty, p.every = true, 200*time.Millisecond
		}
	}
	p.last = p.start
	return p
}

func (p *ProgressLine) line(r pool.PublishResult) string {
	el := time.Since(p.start).Seconds()
	of := ""
	if p.total >= 0 {
		of = fmt.Sprintf("/%d", p.total)
	}
	s := fmt.Sprintf("sent %d%s, acknowledged %d (%.0f msg/s)", r.Sent, of, r.Acked, float64(r.Acked)/max(el, 1e-9))
	if r.Failed > 0 {
		s += fmt.Sprintf(", failed %d", r.Failed)
	}
	return s
}

// Update shows r, if the last line is old enough; it goes as
// ProduceOptions.Progress.
func (p *ProgressLine) Update(r pool.PublishResult) {
	if p.quiet || time.Since(p.last) < p.every {
		return
	}
	p.last = time.Now()
	p.printed = true
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", p.line(r))
	} else {
		fmt.Fprintln(p.w, p.line(r))
	}
}

// Finish shows the last state and ends the line, if a progress line
// was shown at all: a short run leaves none behind.
func (p *ProgressLine) Finish(r pool.PublishResult) {
	if p.quiet || !p.printed {
		return
	}
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s\n", p.line(r))
	} else {
		fmt.Fprintln(p.w, p.line(r))
	}
}
