package steps

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkChain is the steps of `streamrun bench pipeline --steps`
// (a filter, a map and a route) over a 100-byte message, per message:
// what the steps cost a pipeline's host beside the rest of its work.
func BenchmarkChain(b *testing.B) {
	env := newTestEnv(b, Options{})
	c := NewChain(env, []Step{
		{Name: "filter", Kind: Filter, If: mustCompile(b, env, `key != "drop"`, WantBool)},
		{Name: "map", Kind: Map, Set: []Assign{{Field: FieldKey, Expr: mustCompile(b, env, `"k-" + key`, WantString)}}},
		{Name: "route", Kind: Route, To: mustCompile(b, env, `topic + "-out"`, WantString)},
	})
	payload := make([]byte, 100)
	for _, n := range []int{1, 3} {
		steps := c.Steps()[:n]
		cc := NewChain(env, steps)
		b.Run(fmt.Sprintf("steps=%d", n), func(b *testing.B) {
			r := cc.NewRunner()
			b.ReportAllocs()
			m := Message{Topic: "persistent://public/default/in", PublishTime: time.Now()}
			for b.Loop() {
				m.Payload, m.Key, m.Properties = payload, "k1", nil
				if v := r.Run(&m); v.Outcome != Pass {
					b.Fatal(v)
				}
			}
			r.Flush()
		})
	}
}
