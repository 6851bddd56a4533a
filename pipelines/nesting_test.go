package pipelines

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The quick nesting check may only refuse what is really deep: YAML the
// parser reads as at most MaxDepth levels always passes it.
func FuzzNestingCheckRefusesOnlyDeepFiles(f *testing.F) {
	for _, s := range []string{
		"a: [b, {c: d}]\n",
		"a: |\n  [[[[\n  {{{{\n",
		"a: it's [x\nb: 'q[' # [[\n",
		"- - - - x\n",
		"a: \"x\\\"[\"\nb: [1, '[', \"{\"]\n",
		"? [a]\n: b\n",
		"a: >-\n    [\n  [\nb: 1\n",
		strings.Repeat("[", 60) + strings.Repeat("]", 60),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var n yaml.Node
		if yaml.Unmarshal(data, &n) != nil {
			return
		}
		if d := depth(&n, 0); d <= MaxDepth {
			if e := checkNesting("f", data); e != nil {
				t.Fatalf("refused a file %d deep: %v\n%q", d, e, data)
			}
		}
	})
}

// depth is how deep mappings and lists nest in n (aliases not followed).
func depth(n *yaml.Node, level int) int {
	if level > 10*MaxDepth {
		return level
	}
	d := 0
	for _, c := range n.Content {
		d = max(d, depth(c, level+1))
	}
	switch n.Kind {
	case yaml.MappingNode, yaml.SequenceNode:
		return d + 1
	}
	return d
}
