package streamrun

import (
	"regexp"
	"strings"
	"sync"

	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/runtime"
)

// This file is the drained check: a run counts what is published to each
// topic while it runs (its input, and the outputs the handlers asked
// for, at their receipts), so that it can tell when everything it fed is
// processed.

// fullTopic is topic's full name without a partition suffix
// ("orders" -> "persistent://public/default/orders"), or topic itself when
// it is no topic name.
func fullTopic(topic string) string {
	t, err := pulsarwire.ParseTopic(topic)
	if err != nil {
		return topic
	}
	_, base := t.PartitionIndex()
	return base.String()
}

// pipeSources says which topics a pipeline reads.
type pipeSources struct {
	name    string
	topics  map[string]bool
	pattern *regexp.Regexp
}

func (s *pipeSources) reads(topic string) bool {
	if s.topics[topic] {
		return true
	}
	return s.pattern != nil && s.pattern.MatchString(topic)
}

// watch counts what is published to each topic during the run.
type watch struct {
	pipes []pipeSources
	// sinks are the declared outputs no pipeline of the run reads.
	sinks []string

	mu sync.Mutex
	// published is keyed by the topic as it was named (a handler's
	// output topic as the handler wrote it): fullTopic costs a parse and
	// a concatenation, too much for every output (it was a tenth of the
	// host's CPU on a backlog), so names are made full only when drained
	// asks.
	published map[string]int64
}

func newWatch(fs *Files) *watch {
	w := &watch{published: map[string]int64{}}
	for _, p := range fs.pipelines {
		s := pipeSources{name: p.Name, topics: map[string]bool{}}
		for _, t := range p.Source.Topics {
			s.topics[fullTopic(t)] = true
		}
		if p.Source.Pattern != "" {
			pat := p.Source.Pattern
			if !strings.Contains(pat, "://") {
				if strings.Count(pat, "/") >= 2 {
					pat = "persistent://" + pat
				} else {
					pat = "persistent://public/default/" + pat
				}
			}
			// Validated by the loader; a pattern that does not compile
			// here only makes the run wait for nothing from it.
			s.pattern, _ = regexp.Compile("^(?:" + pat + ")$")
		}
		w.pipes = append(w.pipes, s)
	}
	seen := map[string]bool{}
	for _, p := range fs.pipelines {
		for _, o := range p.Outputs {
			t := fullTopic(o)
			if seen[t] || w.isRead(t) {
				continue
			}
			seen[t] = true
			w.sinks = append(w.sinks, t)
		}
	}
	return w
}

// isRead reports whether a pipeline of the run reads topic.
func (w *watch) isRead(topic string) bool {
	for i := range w.pipes {
		if w.pipes[i].reads(topic) {
			return true
		}
	}
	return false
}

// output is the host's Hooks.Output.
func (w *watch) output(_, topic string, err error) {
	if err == nil {
		w.add(topic)
	}
}

func (w *watch) add(topic string) {
	w.mu.Lock()
	w.published[topic]++
	w.mu.Unlock()
}

// drained reports whether every pipeline has settled (acknowledged,
// dead-lettered, dropped or filtered by a step: not handed back for a
// retry) as many messages as were published to its topics during the
// run, and the final-output reader, if any, has read every output that
// reached the final topics.
// The settled counts are read before the published ones: an output is
// counted published before its input is acknowledged, so a message
// settled upstream is always waited for downstream.
func (w *watch) drained(h *runtime.Host, fo *finalOutputs) bool {
	settled := map[string]int64{}
	for _, s := range h.Stats() {
		settled[s.Pipeline] = s.Acked + s.DeadLettered + s.Dropped + s.Filtered
	}
	w.mu.Lock()
	published := make(map[string]int64, len(w.published))
	for t, n := range w.published {
		published[fullTopic(t)] += n
	}
	w.mu.Unlock()
	for i := range w.pipes {
		p := &w.pipes[i]
		var want int64
		for t, n := range published {
			if p.reads(t) {
				want += n
			}
		}
		if settled[p.name] < want {
			return false
		}
	}
	if fo != nil {
		for _, t := range w.sinks {
			if fo.count(t) < published[t] {
				return false
			}
		}
	}
	return true
}
