package runtime

import (
	"errors"
	"fmt"
)

// Ready reports whether the host is ready for work, for a readiness probe:
// nil once every pipeline consumes (StateHealthy) or is paused on
// purpose (StatePaused), else an error saying which is not and why
// (starting, a handler that keeps crashing, stopping, failed).
func (h *Host) Ready() error {
	hs := h.Health()
	if len(hs) == 0 {
		return errors.New("no pipeline running yet")
	}
	var errs []error
	for _, ph := range hs {
		if ph.Healthy() || ph.State == StatePaused {
			continue
		}
		if ph.Reason != "" {
			errs = append(errs, fmt.Errorf("pipeline %s: %s: %s", ph.Pipeline, ph.State, ph.Reason))
		} else {
			errs = append(errs, fmt.Errorf("pipeline %s: %s", ph.Pipeline, ph.State))
		}
	}
	return errors.Join(errs...)
}
