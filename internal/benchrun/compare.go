package benchrun

import (
	"context"
	"fmt"
	"io"
	"slices"
)

// CompareSchemaVersion names the shape of Comparison, as SchemaVersion
// names Result's.
const CompareSchemaVersion = "streamrun.bench.compare/v1"

// Comparison is a pipeline with keyed state measured against the same
// pipeline without, as `streamrun bench pipeline --state --output json`
// writes it: each round runs both, one after the other, each on a
// broker and topics of its own; the ratios are taken within a round.
type Comparison struct {
	Schema  string `json:"schema"`
	Command string `json:"command"` // pipeline
	// Compare is what differs between the two sides: "state"
	// (HandlerOptions.State on one side, off on the other).
	Compare string  `json:"compare"`
	Rounds  []Round `json:"rounds"`
	// MsgPerSecRatio and CPUPerMessageRatio are the rounds' ratios: their
	// median, least and greatest.
	MsgPerSecRatio     Spread `json:"msg_per_sec_ratio"`
	CPUPerMessageRatio Spread `json:"cpu_per_message_ratio"`
}

// Round is one run of each side.
type Round struct {
	// StatefulFirst: the stateful side ran first (every second round, so
	// that neither side always runs on the machine the other left).
	StatefulFirst bool    `json:"stateful_first"`
	Stateless     *Result `json:"stateless"`
	Stateful      *Result `json:"stateful"`
	// MsgPerSecRatio is the stateful side's msg/s over the stateless
	// side's; CPUPerMessageRatio the stateless side's CPU a message over
	// the stateful side's (CPUMicrosPerMessageAll): both 1 when state
	// costs nothing, lower as it costs more.
	MsgPerSecRatio     float64 `json:"msg_per_sec_ratio"`
	CPUPerMessageRatio float64 `json:"cpu_per_message_ratio"`
}

// Spread is a figure over the rounds.
type Spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// CPUMicrosPerMessageAll is the CPU a message of this process and the
// handler processes together, in µs: with the embedded broker, the
// broker, the host and the handler.
func (r *Result) CPUMicrosPerMessageAll() float64 {
	if r.Messages == 0 {
		return 0
	}
	return (r.CPUSeconds + r.HandlerCPUSeconds) * 1e6 / float64(r.Messages)
}

// RunCompare runs rounds rounds of the pipeline o describes, with keyed
// state (HandlerOptions.State) and without, each side a Run of its own;
// the stateless side goes first in odd rounds, the stateful one in even
// rounds. A topic o names becomes TOPIC-stateless and TOPIC-stateful.
// It returns the rounds that ran along with the error that cut the run
// short (a side's error, or a key's count that is off).
func RunCompare(ctx context.Context, o Options, rounds int) (*Comparison, error) {
	if rounds < 1 {
		return nil, fmt.Errorf("benchrun: rounds must be at least 1, got %d", rounds)
	}
	c := &Comparison{Schema: CompareSchemaVersion, Command: string(KindPipeline), Compare: "state"}
	defer c.summarize()
	side := func(state bool) Options {
		so := o
		so.Handler.State = state
		if o.Topic != "" {
			so.Topic = o.Topic + map[bool]string{false: "-stateless", true: "-stateful"}[state]
		}
		return so
	}
	for i := range rounds {
		r := Round{StatefulFirst: i%2 == 1}
		for _, state := range []bool{r.StatefulFirst, !r.StatefulFirst} {
			res, err := Run(ctx, KindPipeline, side(state))
			if state {
				r.Stateful = res
			} else {
				r.Stateless = res
			}
			if err != nil {
				if res != nil {
					c.Rounds = append(c.Rounds, r)
				}
				return c, fmt.Errorf("round %d, %s: %w", i+1, sideName(state), err)
			}
		}
		if r.Stateless.MsgPerSec > 0 {
			r.MsgPerSecRatio = r.Stateful.MsgPerSec / r.Stateless.MsgPerSec
		}
		if all := r.Stateful.CPUMicrosPerMessageAll(); all > 0 {
			r.CPUPerMessageRatio = r.Stateless.CPUMicrosPerMessageAll() / all
		}
		c.Rounds = append(c.Rounds, r)
	}
	return c, nil
}

// complete are the rounds that ran both sides.
func (c *Comparison) complete() []Round {
	return slices.DeleteFunc(slices.Clone(c.Rounds), func(r Round) bool { return r.Stateless == nil || r.Stateful == nil })
}

// summarize sets the spreads of the complete rounds' ratios.
func (c *Comparison) summarize() {
	done := c.complete()
	c.MsgPerSecRatio = spread(done, func(r Round) float64 { return r.MsgPerSecRatio })
	c.CPUPerMessageRatio = spread(done, func(r Round) float64 { return r.CPUPerMessageRatio })
}

func sideName(state bool) string {
	if state {
		return "keyed state"
	}
	return "stateless"
}

// spread is the median, least and greatest of f over the rounds.
func spread(rounds []Round, f func(Round) float64) Spread {
	if len(rounds) == 0 {
		return Spread{}
	}
	v := make([]float64, len(rounds))
	for i, r := range rounds {
		v[i] = f(r)
	}
	slices.Sort(v)
	med := v[len(v)/2]
	if len(v)%2 == 0 {
		med = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return Spread{Median: med, Min: v[0], Max: v[len(v)-1]}
}

// WriteText writes each run's summary, then the comparison, for people.
func (c *Comparison) WriteText(w io.Writer) error {
	for i, r := range c.Rounds {
		for _, state := range []bool{r.StatefulFirst, !r.StatefulFirst} {
			res := r.Stateless
			if state {
				res = r.Stateful
			}
			if res == nil {
				continue
			}
			if _, err := fmt.Fprintf(w, "== round %d of %d: %s\n", i+1, len(c.Rounds), sideName(state)); err != nil {
				return err
			}
			if err := res.WriteText(w); err != nil {
				return err
			}
		}
	}
	var keys int
	if len(c.Rounds) > 0 && c.Rounds[0].Stateless != nil {
		keys = c.Rounds[0].Stateless.Conditions.Keys
	}
	if _, err := fmt.Fprintf(w, "== keyed state (a count per key, %d keys) against stateless; CPU a message: this process and the handler processes\n", keys); err != nil {
		return err
	}
	for i, r := range c.Rounds {
		if r.Stateless == nil || r.Stateful == nil {
			continue
		}
		first := "stateless"
		if r.StatefulFirst {
			first = "keyed state"
		}
		if _, err := fmt.Fprintf(w, "round %d (%s first): %.0f against %.0f msg/s, %.2fx; %.2f against %.2f µs CPU a message, %.2fx\n",
			i+1, first, r.Stateful.MsgPerSec, r.Stateless.MsgPerSec, r.MsgPerSecRatio,
			r.Stateful.CPUMicrosPerMessageAll(), r.Stateless.CPUMicrosPerMessageAll(), r.CPUPerMessageRatio); err != nil {
			return err
		}
	}
	n := len(c.complete())
	if n == 0 {
		return nil
	}
	m, p := c.MsgPerSecRatio, c.CPUPerMessageRatio
	_, err := fmt.Fprintf(w, "keyed state / stateless, median of %d round(s): msg/s %.2fx (%.2fx-%.2fx), CPU a message %.2fx (%.2fx-%.2fx, stateless over keyed state)\n",
		n, m.Median, m.Min, m.Max, p.Median, p.Min, p.Max)
	return err
}
