package control

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/streamrun/streamrun/runtime"
)

// The tap streams a sample of a pipeline's messages as server-sent
// events (text/event-stream): one "message" event per message, its data
// a tapEvent in JSON; a comment every heartbeat keeps proxies from
// closing an idle stream. Events the client does not read fast enough
// are dropped, never queued without bound: the pipeline never waits for
// a tap.

// tapEvent is one tapped message.
type tapEvent struct {
	Time      time.Time `json:"time"`
	Pipeline  string    `json:"pipeline"`
	Kind      string    `json:"kind"` // input or output
	Topic     string    `json:"topic"`
	Key       string    `json:"key,omitempty"`
	MessageID string    `json:"message_id,omitempty"`
	TraceID   string    `json:"trace_id,omitempty"`
	// Payload is the start of the payload: text when it is UTF-8, else
	// base64 (Encoding says which).
	Payload   string `json:"payload"`
	Encoding  string `json:"encoding"` // text or base64
	Size      int    `json:"size"`
	Truncated bool   `json:"truncated"`
	Outcome   string `json:"outcome,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// tapBuffer is how many events wait for a slow client before more are
// dropped.
const tapBuffer = 64

// heartbeat is how often an idle stream gets a comment.
const heartbeat = 15 * time.Second

func (s *Server) tap(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if _, ok := s.named(w, r); !ok {
		return
	}
	rate := 5.0
	if q := r.URL.Query().Get("rate"); q != "" {
		v, err := strconv.ParseFloat(q, 64)
		if err != nil || v <= 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("rate: %q: want events per second, a number above 0", q), nil)
			return
		}
		rate = min(v, s.opts.TapMaxRate)
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "streaming is not supported here", nil)
		return
	}
	events := make(chan runtime.TapEvent, tapBuffer)
	stop, err := s.run.Host().Tap(name, runtime.TapOptions{Rate: rate, MaxPayload: s.opts.TapMaxPayload}, func(e runtime.TapEvent) {
		select {
		case events <- e:
		default: // the client is behind: drop
		}
	})
	if errors.Is(err, runtime.ErrTapNotAllowed) {
		writeError(w, http.StatusForbidden, fmt.Sprintf("pipeline %s does not allow a tap: set tap: true on it in its file", name), nil)
		return
	}
	if err != nil {
		writeError(w, http.StatusConflict, err.Error(), nil)
		return
	}
	defer stop()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, ": tap of %s, at most %g events per second\n\n", name, rate)
	fl.Flush()
	beat := time.NewTicker(heartbeat)
	defer beat.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.closing:
			return
		case <-beat.C:
			if _, err := fmt.Fprint(w, ": still here\n\n"); err != nil {
				return
			}
			fl.Flush()
		case e := <-events:
			b, _ := json.Marshal(eventOf(e))
			if _, err := fmt.Fprintf(w, "event: message\ndata: %s\n\n", b); err != nil {
				return
			}
			fl.Flush()
		}
	}
}

func eventOf(e runtime.TapEvent) tapEvent {
	te := tapEvent{Time: e.Time, Pipeline: e.Pipeline, Kind: string(e.Kind), Topic: e.Topic, Key: e.Key, MessageID: e.MessageID,
		TraceID: e.TraceID, Size: e.Size, Truncated: len(e.Payload) < e.Size, Outcome: e.Outcome, Reason: e.Reason,
		Encoding: "text", Payload: string(e.Payload)}
	if !utf8.Valid(e.Payload) {
		// A truncation may cut a character in two: keep the whole ones.
		valid := e.Payload
		for len(valid) > 0 && !utf8.Valid(valid) && len(e.Payload)-len(valid) < utf8.UTFMax {
			valid = valid[:len(valid)-1]
		}
		if utf8.Valid(valid) && te.Truncated {
			te.Payload = string(valid)
		} else {
			te.Encoding, te.Payload = "base64", base64.StdEncoding.EncodeToString(e.Payload)
		}
	}
	return te
}
