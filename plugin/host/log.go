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
//     and fatal error traces, cgo writes) are logged at INFO, except a
//     crash trace, which is gathered into one ERROR record.
//   - Writes to os.Stdout and os.Stderr inside the plugin go through
//     go-plugin's stdio stream; the host logs each line at INFO with
//     stream=stdout or stream=stderr (lineWriter).
//   - go-plugin's own chatter, on both sides, goes to slog at DEBUG
//     (hclogAdapter).

// maxLogLine caps one logged line; the rest of a longer line is dropped.
const maxLogLine = 1 << 20

// maxCrashTrace caps a gathered crash trace.
const maxCrashTrace = 256 << 10

// logStderr logs the lines of a plugin's stderr pipe until EOF.
func logStderr(ctx context.Context, l *slog.Logger, r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	var trace []byte // a crash trace being gathered
	for {
		line, err := readLine(br)
		if len(line) > 0 || err == nil {
			switch {
			case trace != nil:
				if len(trace) < maxCrashTrace {
					trace = append(append(trace, '\n'), line...)
				}
			case bytes.HasPrefix(line, []byte("panic: ")) || bytes.HasPrefix(line, []byte("fatal error: ")):
				trace = append([]byte(nil), line...)
			default:
				logLine(ctx, l, line)
			}
		}
		if err != nil {
			if trace != nil {
				l.LogAttrs(ctx, slog.LevelError, "plugin crashed", slog.String("trace", string(trace)))
			}
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
				l.Debug("reading plugin stderr", "error", err)
			}
			return
		}
	}
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
func logLine(ctx context.Context, l *slog.Logger, line []byte) {
	if len(line) == 0 {
		return
	}
	if line[0] == '{' {
		if level, msg, attrs, ok := parseRecord(line); ok {
			l.LogAttrs(ctx, level, msg, attrs...)
			return
		}
	}
	l.LogAttrs(ctx, slog.LevelInfo, string(line), slog.String("stream", "stderr"))
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
