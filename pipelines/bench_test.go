package pipelines_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/streamrun/streamrun/pipelines"
)

// BenchmarkParse measures the loader on a shipped example, on a file at
// the size limit, and on the costliest refusal: a syntax error at the end
// of the largest file whose error line is found by bisection.
func BenchmarkParse(b *testing.B) {
	example, err := os.ReadFile("../examples/pipelines/chain.yaml")
	if err != nil {
		b.Fatal(err)
	}
	var big strings.Builder
	big.WriteString("pipelines:\n")
	for i := 0; big.Len() < pipelines.MaxFileSize-200; i++ {
		fmt.Fprintf(&big, "  - {name: p%d, source: {topics: [t], subscription: s}, handler: {plugin: /p}}\n", i)
	}
	line := "  - {name: p, source: {topics: [t], subscription: s}, handler: {plugin: /p}}\n"
	broken := "pipelines:\n" + strings.Repeat(line, (64<<10-100)/len(line)) + "  - {name: [\n"
	for _, c := range []struct {
		name string
		src  string
		ok   bool
	}{
		{"example", string(example), true},
		{"1MiB", big.String(), true},
		{"64KiBSyntaxErrorAtEnd", broken, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.src)))
			for b.Loop() {
				if _, err := pipelines.Parse("x.yaml", []byte(c.src), nil); (err == nil) != c.ok {
					b.Fatal(err)
				}
			}
		})
	}
}
