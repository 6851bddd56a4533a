package pipelines

import (
	"fmt"
	"strings"
)

// ParseGuarantee reads at_least_once or exactly_once, in any case, with
// '_', '-', a space or nothing between the words; "" is the default,
// AtLeastOnce.
func ParseGuarantee(s string) (Guarantee, error) {
	w := strings.NewReplacer("_", "", "-", "", " ", "").Replace(strings.ToLower(strings.TrimSpace(s)))
	switch w {
	case "", "atleastonce":
		return AtLeastOnce, nil
	case "exactlyonce":
		return ExactlyOnce, nil
	}
	return "", fmt.Errorf("guarantee %q: want at_least_once or exactly_once", s)
}

func (g Guarantee) normal() (Guarantee, bool) {
	n, err := ParseGuarantee(string(g))
	return n, err == nil
}

// ExactlyOnce says whether the pipeline commits its effects in
// transactions (guarantee exactly_once, in any of its spellings).
func (p *Pipeline) ExactlyOnce() bool {
	g, _ := p.Guarantee.normal()
	return g == ExactlyOnce
}

// guarantee checks guarantee and the settings that go with exactly_once:
// its interval and timeout, and topics that can take part in a
// transaction (a non-persistent topic cannot).
func (c *checker) guarantee(p *Pipeline) {
	g, err := ParseGuarantee(string(p.Guarantee))
	if err != nil {
		c.bad("guarantee", "%v", err)
		return
	}
	if g != ExactlyOnce {
		if p.CommitInterval != 0 {
			c.bad("commit_interval", "only with guarantee: exactly_once (an at_least_once pipeline acknowledges each message once its outputs are stored)")
		}
		if p.TransactionTimeout != 0 {
			c.bad("transaction_timeout", "only with guarantee: exactly_once")
		}
		return
	}
	interval, timeout := p.CommitInterval, p.TransactionTimeout
	if interval == 0 {
		interval = DefaultCommitInterval
	}
	if timeout == 0 {
		timeout = DefaultTransactionTimeout
	}
	if interval > 0 && timeout > 0 && timeout <= interval {
		c.bad("transaction_timeout", "%v is not more than commit_interval %v: every transaction would time out before its commit", timeout, interval)
	}
	const why = "exactly_once commits in Pulsar transactions, which non-persistent topics do not take part in"
	if t := p.State.Changelog; p.State.Enabled && nonPersistent(t) {
		c.bad("state.changelog", "%q is non-persistent: %s", t, why)
	}
	for i, t := range p.Source.Topics {
		if nonPersistent(t) {
			c.bad(fmt.Sprintf("source.topics[%d]", i), "%q is non-persistent: %s", t, why)
		}
	}
	if nonPersistent(p.Source.Pattern) {
		c.bad("source.pattern", "%q matches non-persistent topics: %s", p.Source.Pattern, why)
	}
	for i, t := range p.Outputs {
		if nonPersistent(t) {
			c.bad(fmt.Sprintf("outputs[%d]", i), "%q is non-persistent: %s", t, why)
		}
	}
	if p.Window.Type != "" {
		// A fire's record commits with its outputs; a late message goes
		// to the late topic with its acknowledgement.
		if t := p.Window.Changelog; nonPersistent(t) {
			c.bad("window.changelog", "%q is non-persistent: %s", t, why)
		}
		if t := p.Window.LateTopic; nonPersistent(t) {
			c.bad("window.late_topic", "%q is non-persistent: %s", t, why)
		}
	}
	if t := p.ErrorPolicy.DeadLetterTopic; nonPersistent(t) {
		c.bad("error_policy.dead_letter_topic", "%q is non-persistent: %s", t, why)
	}
}

func nonPersistent(topic string) bool {
	return strings.HasPrefix(strings.ToLower(topic), "non-persistent://")
}
