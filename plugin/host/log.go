package host

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
)

// How a plugin's output reaches the host's logs:
//
//   - The SDK points the plugin's slog default (and so the log package) at
//     the process's real stderr, as JSON lines. The host reads that pipe
//     (logStderr) and logs each record again through its own slog.Logger at
//     the record's level, with the record's attributes, tagged plugin= and
//     instance=. Lines that are not such records (the Go runtime's panic
//     and fatal error traces, Python's tracebacks, cgo writes) are logged
//     at INFO, except a Go crash trace and a Python traceback, each
//     gathered into one ERROR record.
//   - The last of those records are kept (stderrTail), so that a plugin
//     that dies before its handshake is reported with what it said.
//   - Writes to os.Stdout and os.Stderr inside the plugin go through
//     go-plugin's stdio stream; the host logs each line at INFO with
//     stream=stdout or stream=stderr (lineWriter).
//   - go-plugin's own chatter, on both sides, goes to slog at DEBUG
//     (hclogAdapter).

// maxLogLine caps one logged line; the rest of a longer line is dropped.
const maxLogLine = 1 << 20

// maxCrashTrace caps a gathered crash trace.
const maxCrashTrace = 256 << 10

// logStderr logs the lines of a plugin's stderr pipe until EOF, keeping
// the last records in tail.
func logStderr(ctx context.Context, l *slog.Logger, r io.Reader, tail *stderrTail) {
	br := bufio.NewReaderSize(r, 64<<10)
	var trace []byte // a Go crash trace being gathered, to EOF
	var tb []byte    // a Python traceback being gathered, to its exception line
	for {
		line, err := readLine(br)
		if len(line) > 0 || err == nil {
			switch {
			case trace != nil:
				if len(trace) < maxCrashTrace {
					trace = append(append(trace, '\n'), line...)
				}
			case tb != nil:
				if len(tb) < maxCrashTrace {
					tb = append(append(tb, '\n'), line...)
				}
				if endsTraceback(line) {
					logTraceback(ctx, l, tb, line, tail)
					tb = nil
				}
			case bytes.HasPrefix(line, []byte("panic: ")) || bytes.HasPrefix(line, []byte("fatal error: ")):
				trace = append([]byte(nil), line...)
			case startsTraceback(line):
				tb = append([]byte(nil), line...)
			default:
				logLine(ctx, l, line, tail)
			}
		}
		if err != nil {
			if tb != nil {
				logTraceback(ctx, l, tb, nil, tail)
			}
			if trace != nil {
				l.LogAttrs(ctx, slog.LevelError, "plugin crashed", slog.String("trace", string(trace)))
				tail.add(string(trace), false)
			}
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
				l.Debug("reading plugin stderr", "error", err)
			}
			return
		}
	}
}

// How Python writes an exception it was not given to handle: a header,
// the frames (indented), and the exception's own line, not indented; a
// chained one is introduced by one of the phrases below. A syntax error in
// the script itself comes without the header, from its "  File" line.
var (
	tracebackHeader = []byte("Traceback (most recent call last):")
	tracebackChains = [][]byte{
		[]byte("During handling of the above exception, another exception occurred:"),
		[]byte("The above exception was the direct cause of the following exception:"),
	}
	tracebackFile = []byte(`  File "`)
)

func startsTraceback(line []byte) bool {
	return bytes.Equal(line, tracebackHeader) || bytes.HasPrefix(line, tracebackFile) || isChainPhrase(line)
}

func isChainPhrase(line []byte) bool {
	for _, p := range tracebackChains {
		if bytes.Equal(line, p) {
			return true
		}
	}
	return false
}

// endsTraceback reports whether line, within a traceback, is its last:
// the exception's own line, the first that is not indented (blank lines
// and headers come between chained exceptions).
func endsTraceback(line []byte) bool {
	if len(line) == 0 || line[0] == ' ' || line[0] == '\t' {
		return false
	}
	return !bytes.Equal(line, tracebackHeader) && !isChainPhrase(line)
}

// logTraceback logs a gathered Python traceback as one ERROR record, its
// exception line (nil when the pipe ended first) as the error.
func logTraceback(ctx context.Context, l *slog.Logger, tb, exc []byte, tail *stderrTail) {
	attrs := []slog.Attr{slog.String("trace", string(tb))}
	if exc != nil {
		attrs = append([]slog.Attr{slog.String("error", string(exc))}, attrs...)
	}
	l.LogAttrs(ctx, slog.LevelError, "plugin raised an exception it did not handle", attrs...)
	tail.add(string(tb), true)
}

// readLine returns the next line without its newline, at most maxLogLine
// bytes of it.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(line)+len(frag) <= maxLogLine {
			line = append(line, frag...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimRight(line, "\r\n"), err
	}
}

// logLine logs one line of plugin stderr: a slog JSON record at its own
// level with its attributes, anything else as text at INFO.
func logLine(ctx context.Context, l *slog.Logger, line []byte, tail *stderrTail) {
	if len(line) == 0 {
		return
	}
	if line[0] == '{' {
		if level, msg, attrs, ok := parseRecord(line); ok {
			l.LogAttrs(ctx, level, msg, attrs...)
			tail.add(recordText(level, msg, attrs), false)
			return
		}
	}
	l.LogAttrs(ctx, slog.LevelInfo, string(line), slog.String("stream", "stderr"))
	tail.add(string(line), false)
}

// parseRecord reads a line written by slog.JSONHandler, keeping the order
// of its attributes and dropping its time (the host stamps its own).
func parseRecord(line []byte) (level slog.Level, msg string, attrs []slog.Attr, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return 0, "", nil, false
	}
	var haveLevel, haveMsg bool
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return 0, "", nil, false
		}
		key, _ := t.(string)
		var v any
		if err := dec.Decode(&v); err != nil {
			return 0, "", nil, false
		}
		switch key {
		case slog.TimeKey:
		case slog.LevelKey:
			s, _ := v.(string)
			if level.UnmarshalText([]byte(s)) != nil {
				return 0, "", nil, false
			}
			haveLevel = true
		case slog.MessageKey:
			msg, _ = v.(string)
			haveMsg = true
		default:
			attrs = append(attrs, slog.Any(key, v))
		}
	}
	return level, msg, attrs, haveLevel && haveMsg
}

// lineWriter logs what is written to it line by line at INFO; it is the
// host's end of a plugin's os.Stdout or os.Stderr.
type lineWriter struct {
	l      *slog.Logger
	stream string
	mu     sync.Mutex
	buf    []byte
}

func newLineWriter(l *slog.Logger, stream string) *lineWriter {
	return &lineWriter{l: l, stream: stream}
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(w.buf)+len(p) <= maxLogLine {
				w.buf = append(w.buf, p...)
			}
			break
		}
		w.buf = append(w.buf, p[:i]...)
		w.emit()
		p = p[i+1:]
	}
	return n, nil
}

func (w *lineWriter) emit() {
	line := strings.TrimRight(string(w.buf), "\r")
	w.buf = w.buf[:0]
	if line != "" {
		w.l.LogAttrs(context.Background(), slog.LevelInfo, line, slog.String("stream", w.stream))
	}
}

// lowestLevel is the lowest level l logs, for the plugin to log at.
func lowestLevel(l *slog.Logger) slog.Level {
	for _, lv := range []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn} {
		if l.Enabled(context.Background(), lv) {
			return lv
		}
	}
	return slog.LevelError
}
