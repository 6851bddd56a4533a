package campaign_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	streamrun "github.com/streamrun/streamrun/runtime"
)

// countCheck is what the final check of a counting pipeline found: the
// count of every key, read back from its changelog as a host that starts
// reads it, against the number of the key's messages, and the outputs'
// counts, which must be 1 to that number, each once.
type countCheck struct {
	Pipeline string `json:"pipeline"`
	// Messages are the inputs that count: those whose send receipt
	// arrived, and those whose send failed but that came out all the same
	// (the broker stored them and the receipt was lost); a publish the
	// broker stored twice counts twice.
	Messages int `json:"messages"`
	Keys     int `json:"keys"`
	// ChangelogWrong: keys whose count in the changelog is not their
	// number of messages. OutputsWrong: keys whose outputs do not carry
	// every count from 1 to it exactly once (a change lost or applied
	// twice along the way, even if a later one hid it).
	ChangelogWrong int      `json:"changelog_counts_wrong"`
	OutputsWrong   int      `json:"output_counts_wrong"`
	Examples       []string `json:"examples,omitempty"`
	Err            string   `json:"error,omitempty"`
}

func (c countCheck) wrong() int { return c.ChangelogWrong + c.OutputsWrong }

// wantCounts is the number of messages of each key that the counting
// pipeline must have counted.
func (p *pipe) wantCounts() (map[string]int, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	want := map[string]int{}
	n := 0
	for seq, r := range p.receipt {
		if r == receiptOK || p.outs[seq] > 0 {
			// A publish the broker stored twice is counted twice (inputs).
			k := max(len(p.inputs[seq]), 1)
			want[keyOf(seq)] += k
			n += k
		}
	}
	return want, n
}

// checkCounts compares p's counts with its messages, once everything
// receipted came out. The changelog is read as a host reads it at start
// (runtime.ReadState: committed changes only, up to a fence it writes), so
// what it finds is what a host taking over would count on. A mismatch is
// read again for up to countSettle, in case a message whose send failed
// but which the broker stored is still on its way.
func (e *env) checkCounts(ctx context.Context, p *pipe) countCheck {
	const countSettle = 30 * time.Second
	deadline := time.Now().Add(countSettle)
	for {
		c := e.countOnce(ctx, p)
		if (c.wrong() == 0 && c.Err == "") || time.Now().After(deadline) || ctx.Err() != nil {
			return c
		}
		sleepCtx(ctx, time.Second)
	}
}

func (e *env) countOnce(ctx context.Context, p *pipe) countCheck {
	want, n := p.wantCounts()
	c := countCheck{Pipeline: p.name, Messages: n, Keys: len(want)}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	st, err := streamrun.ReadState(rctx, e.client, p.changelog)
	if err != nil {
		c.Err = err.Error()
		return c
	}
	example := func(s string, a ...any) {
		if len(c.Examples) < 10 {
			c.Examples = append(c.Examples, fmt.Sprintf(s, a...))
		}
	}
	ks := make([]string, 0, len(want))
	for k := range want {
		ks = append(ks, k)
	}
	for k := range st {
		if _, ok := want[k]; !ok {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, k := range ks {
		w := want[k]
		if got := string(st[k]); got != strconv.Itoa(w) {
			c.ChangelogWrong++
			example("key %s: count %q in the changelog, %d messages", k, got, w)
		}
		seen := p.counted[k]
		ok := len(seen) == w
		for i := 1; ok && i <= w; i++ {
			ok = seen[i] == 1
		}
		if !ok {
			c.OutputsWrong++
			var odd []string
			for i := 1; i <= w; i++ {
				if seen[i] != 1 && len(odd) < 5 {
					odd = append(odd, fmt.Sprintf("%d×%d", i, seen[i]))
				}
			}
			for i, times := range seen {
				if (i < 1 || i > w) && len(odd) < 5 {
					odd = append(odd, fmt.Sprintf("%d×%d", i, times))
				}
			}
			example("key %s: %d messages, outputs count×times %v", k, w, odd)
		}
	}
	return c
}
