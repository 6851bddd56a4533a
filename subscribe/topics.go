package subscribe

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
)

// topicSpec is one topic or partition to consume.
type topicSpec struct {
	name       string // full name
	base       string // the partitioned topic's full name, or name
	partition  int32  // -1: not a partition
	discovered bool   // found by the pattern
}

// compilePattern reads a topic pattern: the regular expression anchored
// at both ends, the namespace it lists and the kind of topics.
func compilePattern(p string) (*regexp.Regexp, string, pool.TopicMode, error) {
	full := p
	if !strings.Contains(p, "://") {
		if strings.Count(p, "/") >= 2 {
			full = "persistent://" + p
		} else {
			full = "persistent://public/default/" + p
		}
	}
	i := strings.Index(full, "://")
	mode := pool.PersistentTopics
	switch full[:i] {
	case "persistent":
	case "non-persistent":
		mode = pool.NonPersistentTopics
	default:
		return nil, "", 0, fmt.Errorf("subscribe: pattern %q: the domain must be persistent:// or non-persistent://", p)
	}
	parts := strings.SplitN(full[i+3:], "/", 3)
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return nil, "", 0, fmt.Errorf("subscribe: pattern %q: want persistent://tenant/namespace/<regular expression>", p)
	}
	for _, s := range parts[:2] {
		if regexp.QuoteMeta(s) != s {
			return nil, "", 0, fmt.Errorf("subscribe: pattern %q: the tenant and namespace must be literal, not %q", p, s)
		}
	}
	re, err := regexp.Compile("^(?:" + full + ")$")
	if err != nil {
		return nil, "", 0, fmt.Errorf("subscribe: pattern %q: %w", p, err)
	}
	return re, parts[0] + "/" + parts[1], mode, nil
}

// resolve lists what to consume: the given topics, partitioned ones
// expanded to their partitions, or the pattern's topics. With retry each
// lookup runs under the consumer's retries, else it makes one attempt.
func (c *Consumer) resolve(ctx context.Context, retry bool) ([]topicSpec, error) {
	run := func(name string, op func(ctx context.Context) error) error {
		if retry {
			return c.client.RetryWith(ctx, c.opts.Retries, name, op)
		}
		ctx, cancel := context.WithTimeout(ctx, c.opts.Retries.Timeout)
		defer cancel()
		return op(ctx)
	}
	if c.pattern != nil {
		var names []string
		err := run("topics of "+c.ns, func(ctx context.Context) error {
			var err error
			names, err = c.client.TopicsOfNamespace(ctx, c.ns, c.mode)
			return err
		})
		if err != nil {
			return nil, &SubscribeError{Topic: c.opts.Pattern, Subscription: c.opts.Subscription, Err: err}
		}
		return c.matching(names), nil
	}
	var out []topicSpec
	seen := map[string]bool{}
	add := func(s topicSpec) {
		if !seen[s.name] {
			seen[s.name] = true
			out = append(out, s)
		}
	}
	for _, topic := range c.opts.Topics {
		t, err := pulsarwire.ParseTopic(topic)
		if err != nil {
			return nil, err
		}
		name := t.String()
		if i, base := t.PartitionIndex(); i >= 0 {
			add(topicSpec{name: name, base: base.String(), partition: int32(i)})
			continue
		}
		var n int
		err = run("partitioned metadata of "+name, func(ctx context.Context) error {
			var err error
			n, err = c.client.PartitionedTopicMetadata(ctx, name)
			return err
		})
		if err != nil {
			return nil, &SubscribeError{Topic: name, Subscription: c.opts.Subscription, Err: err}
		}
		if n == 0 {
			add(topicSpec{name: name, base: name, partition: -1})
			continue
		}
		for i := 0; i < n; i++ {
			add(topicSpec{name: t.Partition(i).String(), base: name, partition: int32(i)})
		}
	}
	return out, nil
}

// matching keeps the listed topics (and partitions) whose name (the
// partitioned topic's name, for a partition) matches the pattern. Brokers
// list full names; the name is parsed only when it matches.
func (c *Consumer) matching(names []string) []topicSpec {
	var out []topicSpec
	for _, n := range names {
		base, partition := n, int32(-1)
		if i := strings.LastIndex(n, pulsarwire.PartitionSuffix); i >= 0 {
			if p, err := strconv.ParseInt(n[i+len(pulsarwire.PartitionSuffix):], 10, 32); err == nil && p >= 0 {
				base, partition = n[:i], int32(p)
			}
		}
		if !c.pattern.MatchString(base) {
			if strings.Contains(n, "://") {
				continue
			}
			// A short name: match its full form.
			t, err := pulsarwire.ParseTopic(n)
			if err != nil {
				continue
			}
			i, b := t.PartitionIndex()
			if n, base, partition = t.String(), b.String(), int32(i); !c.pattern.MatchString(base) {
				continue
			}
		}
		out = append(out, topicSpec{name: n, base: base, partition: partition, discovered: true})
	}
	return out
}

// refreshLoop lists the topics again every PatternRefresh.
func (c *Consumer) refreshLoop() {
	t := time.NewTicker(c.opts.PatternRefresh)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		c.Refresh(c.ctx)
	}
}

// Refresh lists the topics now, as the consumer does every
// PatternRefresh: topics (and partitions) that appeared join, starting at
// their earliest message; with a pattern, topics that are gone leave.
func (c *Consumer) Refresh(ctx context.Context) error {
	specs, err := c.resolve(ctx, false)
	if err != nil {
		c.log.Warn("listing topics failed; trying again at the next refresh", "err", err)
		return err
	}
	want := make(map[string]topicSpec, len(specs))
	for _, s := range specs {
		want[s.name] = s
	}
	var added, removed []*partConsumer
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	for name, s := range want {
		if _, ok := c.parts[name]; !ok {
			pc := newPart(c, s, Earliest)
			c.parts[name] = pc
			added = append(added, pc)
		}
	}
	if c.pattern != nil {
		for name, pc := range c.parts {
			if _, ok := want[name]; !ok {
				delete(c.parts, name)
				removed = append(removed, pc)
			}
		}
	}
	c.mu.Unlock()
	for _, pc := range removed {
		c.log.Info("topic left the pattern", "topic", pc.topic)
		ctx, cancel := context.WithTimeout(ctx, c.opts.Retries.Timeout)
		pc.close(ctx)
		cancel()
	}
	for _, pc := range added {
		c.log.Info("topic joined", "topic", pc.topic)
		pc.startReconnect()
	}
	return nil
}
