package subscribe

import (
	"testing"

	"github.com/streamrun/streamrun/pipelines"
)

// pipelines checks a file's pattern before anything runs, by rules of its
// own; New checks it again. They must agree, or a file that validates
// fails at start (or one that would run is refused).
func TestPatternRulesAgreeWithPipelines(t *testing.T) {
	for _, p := range []string{"orders-.*", "persistent://public/default/.*", "non-persistent://t/ns/x.*", "t/ns/(a|b)",
		"persistent://pub.*/default/x", "persistent://public/def+/x", "http://t/ns/x", "persistent://t//x", "(", "persistent://t/ns/[", "a/b"} {
		src := pipelines.Pipeline{Name: "p", Source: pipelines.Source{Pattern: p, Subscription: "s"}, Handler: pipelines.Handler{Plugin: "x"}}
		perr := src.Validate()
		_, _, _, serr := compilePattern(p)
		if (perr == nil) != (serr == nil) {
			t.Errorf("pattern %q: pipelines says %v, subscribe says %v", p, perr, serr)
		}
	}
}
