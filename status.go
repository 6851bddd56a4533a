package streamrun

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/streamrun/streamrun/runtime"
)

// status logs one line per pipeline: its totals, its rate since the last
// line, and how many of its instances are up; before the pipelines run,
// one line saying the run is starting. While the broker cannot be
// reached the lines are warnings and say so (broker=...).
type status struct {
	log  *slog.Logger
	last map[string]int64 // settled totals at the last line
	at   time.Time
}

func newStatus(log *slog.Logger) *status {
	return &status{log: log, last: map[string]int64{}, at: time.Now()}
}

// report logs the lines for h (nil before it runs), unreachable saying
// what waits for the broker ("" when it is reached).
func (s *status) report(h *runtime.Host, unreachable string) {
	level := slog.LevelInfo
	var broker []any
	if unreachable != "" {
		level, broker = slog.LevelWarn, []any{"broker", unreachable}
	}
	if h == nil {
		s.log.Log(context.Background(), level, "status", append([]any{"state", "starting"}, broker...)...)
		return
	}
	now := time.Now()
	secs := now.Sub(s.at).Seconds()
	up := map[string]string{}
	for _, p := range h.Health() {
		n := 0
		for _, i := range p.Instances {
			if i.Up {
				n++
			}
		}
		up[p.Pipeline] = fmt.Sprintf("%d/%d", n, len(p.Instances))
	}
	for _, st := range h.Stats() {
		settled := st.Acked + st.DeadLettered + st.Dropped + st.Retried
		rate := 0.0
		if secs > 0 {
			rate = float64(settled-s.last[st.Pipeline]) / secs
		}
		s.last[st.Pipeline] = settled
		s.log.Log(context.Background(), level, "status", append([]any{"pipeline", st.Pipeline, "received", st.Received, "acked", st.Acked,
			"retried", st.Retried, "dead_lettered", st.DeadLettered, "msg_per_s", fmt.Sprintf("%.0f", rate),
			"instances_up", up[st.Pipeline]}, broker...)...)
	}
	s.at = now
}

// logTotals logs every pipeline's totals once the run is over.
func logTotals(log *slog.Logger, h *runtime.Host) {
	for _, s := range h.Stats() {
		log.Info("pipeline totals", "pipeline", s.Pipeline, "received", s.Received, "acked", s.Acked,
			"retried", s.Retried, "dead_lettered", s.DeadLettered, "dropped", s.Dropped, "handed_back", s.HandedBack)
	}
}
