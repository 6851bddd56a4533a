package pipelines_test

import (
	"strings"
	"testing"
	"time"

	"github.com/streamrun/streamrun/pipelines"
)

func TestGuaranteeDefaults(t *testing.T) {
	p := valid()
	p.Guarantee = "exactly once"
	d := p.WithDefaults()
	if d.Guarantee != pipelines.ExactlyOnce || d.CommitInterval != 100*time.Millisecond || d.TransactionTimeout != 10*time.Second || !d.ExactlyOnce() {
		t.Errorf("exactly_once defaults: %q %v %v", d.Guarantee, d.CommitInterval, d.TransactionTimeout)
	}
	if d := valid().WithDefaults(); d.Guarantee != pipelines.AtLeastOnce || d.CommitInterval != 0 || d.TransactionTimeout != 0 || d.ExactlyOnce() {
		t.Errorf("at_least_once defaults: %q %v %v", d.Guarantee, d.CommitInterval, d.TransactionTimeout)
	}
}

// What cannot be exactly once is refused at its place in the file, with
// the reason.
func TestGuaranteeRefusals(t *testing.T) {
	for _, c := range []struct{ name, yaml, want string }{
		{"unknown", "    guarantee: at_most_once\n",
			`g.yaml:6:16: pipelines[0].guarantee: guarantee "at_most_once": want at_least_once or exactly_once`},
		{"interval without exactly_once", "    commit_interval: 1s\n",
			"g.yaml:6:22: pipelines[0].commit_interval: only with guarantee: exactly_once"},
		{"timeout without exactly_once", "    guarantee: at_least_once\n    transaction_timeout: 1s\n",
			"g.yaml:7:26: pipelines[0].transaction_timeout: only with guarantee: exactly_once"},
		{"timeout not past the interval", "    guarantee: exactly_once\n    commit_interval: 2s\n    transaction_timeout: 2s\n",
			"g.yaml:8:26: pipelines[0].transaction_timeout: 2s is not more than commit_interval 2s"},
		{"default timeout not past the interval", "    guarantee: exactly_once\n    commit_interval: 20s\n",
			"pipelines[0].transaction_timeout: 10s is not more than commit_interval 20s"},
		{"non-persistent output", "    guarantee: exactly_once\n    outputs: [non-persistent://public/default/o]\n",
			`g.yaml:6:15: pipelines[0].outputs[0]: "non-persistent://public/default/o" is non-persistent: exactly_once commits in Pulsar transactions`},
		{"non-persistent changelog", "    source: {topics: [in], subscription: s, type: exclusive}\n    guarantee: exactly_once\n    state: {enabled: true, changelog: \"non-persistent://public/default/c\"}\n",
			`pipelines[0].state.changelog: "non-persistent://public/default/c" is non-persistent: exactly_once commits in Pulsar transactions`},
		{"non-persistent dead letters", "    guarantee: exactly_once\n    error_policy: {dead_letter_topic: non-persistent://public/default/d}\n",
			`pipelines[0].error_policy.dead_letter_topic: "non-persistent://public/default/d" is non-persistent`},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := "pipelines:\n  - name: p\n    source: {topics: [in], subscription: s}\n    handler: {plugin: /p}\n    outputs: [out]\n" + c.yaml
			if strings.Contains(c.yaml, "outputs:") {
				src = strings.Replace(src, "    outputs: [out]\n", "", 1)
			}
			if strings.Contains(c.yaml, "source:") {
				src = strings.Replace(src, "    source: {topics: [in], subscription: s}\n", "", 1)
			}
			_, err := pipelines.Parse("g.yaml", []byte(src), env(nil))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error:\n%v\nwant it to contain\n%s", err, c.want)
			}
		})
	}
	src := "pipelines:\n  - name: p\n    source: {topics: [\"non-persistent://public/default/in\"], subscription: s}\n    handler: {plugin: /p}\n    guarantee: exactly-once\n"
	if _, err := pipelines.Parse("g.yaml", []byte(src), env(nil)); err == nil || !strings.Contains(err.Error(), "g.yaml:3:23: pipelines[0].source.topics[0]") {
		t.Errorf("non-persistent source: %v", err)
	}
	ok := "pipelines:\n  - name: p\n    source: {topics: [in], subscription: s}\n    handler: {plugin: /p}\n    guarantee: exactly_once\n    commit_interval: 50ms\n"
	if _, err := pipelines.Parse("g.yaml", []byte(ok), env(nil)); err != nil {
		t.Errorf("a valid exactly_once pipeline: %v", err)
	}
}
