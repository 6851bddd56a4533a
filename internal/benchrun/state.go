package benchrun

import (
	"context"
	"fmt"
	"maps"
	"strconv"

	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/runtime"
)

// stateCounts checks a stateful run's counts (HandlerOptions.State):
// each pipeline's changelog, and the counts it held before the run
// (none on topics the run named itself).
type stateCounts struct {
	changelogs []string
	before     []map[string]int64
}

// countsBefore notes the pipelines' changelogs, for DeleteOwnTopics too,
// and reads them when the run did not name its topics itself (a topic of
// the caller's may hold the counts of an earlier run).
func (b *Bench) countsBefore(ctx context.Context, ps []pipelines.Pipeline) (*stateCounts, error) {
	sc := &stateCounts{before: make([]map[string]int64, len(ps))}
	for i, p := range ps {
		cl := p.ChangelogTopic()
		sc.changelogs = append(sc.changelogs, cl)
		b.outs = append(b.outs, cl)
		if b.ownTopics {
			continue
		}
		var err error
		if sc.before[i], err = readCounts(ctx, b, cl); err != nil {
			return nil, err
		}
	}
	return sc, nil
}

// readCounts reads the counts in changelog, as a host reads it at start.
func readCounts(ctx context.Context, b *Bench, changelog string) (map[string]int64, error) {
	vals, err := runtime.ReadState(ctx, b.client, changelog)
	if err != nil {
		return nil, fmt.Errorf("read the counts in %s: %w", changelog, err)
	}
	counts := make(map[string]int64, len(vals))
	for k, v := range vals {
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("read the counts in %s: key %q holds %q, not a count", changelog, k, v)
		}
		counts[k] = n
	}
	return counts, nil
}

// check reads each changelog back and compares every key's count with
// the messages published with it: sent messages went round-robin over
// the topics (message n to topic n mod topics) and over the keys (key
// n mod Keys), as the publisher sends them. It returns the number of
// keys checked, and an error naming the first key whose count is off.
func (sc *stateCounts) check(ctx context.Context, b *Bench, sent int64) (int, error) {
	keys, topics := int64(b.o.Keys), int64(len(sc.changelogs))
	checked := 0
	for t, cl := range sc.changelogs {
		want := make(map[string]int64, keys)
		maps.Copy(want, sc.before[t])
		per := make([]int64, keys)
		for n := int64(t); n < sent; n += topics {
			per[n%keys]++
		}
		for k, c := range per {
			if c > 0 {
				want[keyName(k)] += c
			}
		}
		got, err := readCounts(ctx, b, cl)
		if err != nil {
			return checked, err
		}
		for k, w := range want {
			if got[k] != w {
				return checked, fmt.Errorf("keyed state in %s: key %q counted %d, want %d (the messages published with it)", cl, k, got[k], w)
			}
			checked++
		}
		if len(got) != len(want) {
			return checked, fmt.Errorf("keyed state in %s: %d keys, want %d", cl, len(got), len(want))
		}
	}
	return checked, nil
}
