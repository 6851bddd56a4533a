package streamrun

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/streamrun/streamrun/runtime"
)

// status logs one line per pipeline: its totals, its rate since the last
// line, and how many of its instances are up.
type status struct {
	log  *slog.Logger
	last map[string]int64 // settled totals at the last line
	at   time.Time
}

func newStatus(log *slog.Logger) *status {
	return &status{log: log, last: map[string]int64{}, at: time.Now()}
}

func (s *status) report(h *runtime.Host) {
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
		s.log.Info("status", "pipeline", st.Pipeline, "received", st.Received, "acked", st.Acked,
			"retried", st.Retried, "dead_lettered", st.DeadLettered, "msg_per_s", fmt.Sprintf("%.0f", rate),
			"instances_up", up[st.Pipeline])
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
