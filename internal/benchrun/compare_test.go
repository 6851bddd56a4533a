package benchrun

import "testing"

// The ratios over the rounds are their median (of an even number, the
// mean of the middle two), least and greatest, whatever the order the
// rounds ran in; rounds missing a side are left out.
func TestComparisonSpread(t *testing.T) {
	res := func(msgs int64, rate, cpu float64) *Result {
		return &Result{Messages: msgs, MsgPerSec: rate, CPUSeconds: cpu}
	}
	c := &Comparison{Rounds: []Round{
		{Stateless: res(1, 1, 1), Stateful: res(1, 1, 1), MsgPerSecRatio: 0.5, CPUPerMessageRatio: 1},
		{Stateless: res(1, 1, 1), Stateful: res(1, 1, 1), MsgPerSecRatio: 0.25, CPUPerMessageRatio: 0.75},
		{Stateless: res(1, 1, 1), MsgPerSecRatio: 0.1}, // cut short
		{Stateless: res(1, 1, 1), Stateful: res(1, 1, 1), MsgPerSecRatio: 0.75, CPUPerMessageRatio: 0.25},
		{Stateless: res(1, 1, 1), Stateful: res(1, 1, 1), MsgPerSecRatio: 1, CPUPerMessageRatio: 0.5},
	}}
	c.summarize()
	if want := (Spread{Median: 0.625, Min: 0.25, Max: 1}); c.MsgPerSecRatio != want {
		t.Errorf("msg/s ratio %+v, want %+v", c.MsgPerSecRatio, want)
	}
	if want := (Spread{Median: 0.625, Min: 0.25, Max: 1}); c.CPUPerMessageRatio != want {
		t.Errorf("CPU ratio %+v, want %+v", c.CPUPerMessageRatio, want)
	}
	c.Rounds = c.Rounds[:2]
	c.Rounds = append(c.Rounds, Round{Stateless: res(1, 1, 1), Stateful: res(1, 1, 1), MsgPerSecRatio: 0.375, CPUPerMessageRatio: 0.9})
	c.summarize()
	if want := (Spread{Median: 0.375, Min: 0.25, Max: 0.5}); c.MsgPerSecRatio != want {
		t.Errorf("odd rounds: msg/s ratio %+v, want %+v", c.MsgPerSecRatio, want)
	}
	// The CPU a message counts the handler processes' too.
	r := &Result{Messages: 1000, CPUSeconds: 0.003, HandlerCPUSeconds: 0.001}
	if got := r.CPUMicrosPerMessageAll(); got < 3.999 || got > 4.001 {
		t.Errorf("CPU a message %v µs, want 4", got)
	}
}
