package streamrun

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// setPipelineField sets a boolean field of one pipeline in a file's
// text, touching nothing else of it: the value replaced where the field
// is written, or a line added under the pipeline's name where it is not
// (in a block mapping; a pipeline written in flow style, {name: ...},
// is refused). The result is checked by the loader like any new version
// of the file.
func setPipelineField(file string, data []byte, pipeline, field string, v bool) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, fmt.Errorf("%s: not a pipeline file", file)
	}
	ps := mappingValue(doc.Content[0], "pipelines")
	if ps == nil || ps.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("%s: no pipelines list", file)
	}
	var pm *yaml.Node
	for _, n := range ps.Content {
		if name := mappingValue(n, "name"); name != nil && name.Kind == yaml.ScalarNode && name.Value == pipeline {
			pm = n
			break
		}
	}
	if pm == nil {
		return nil, fmt.Errorf("%s: no pipeline named %q written in it (a name from ${VAR} cannot be edited)", file, pipeline)
	}
	if pm.Style&yaml.FlowStyle != 0 {
		return nil, fmt.Errorf("%s:%d:%d: pipeline %s is written in flow style ({...}): set %s: %v in the file yourself",
			file, pm.Line, pm.Column, pipeline, field, v)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	text := strconv.FormatBool(v)
	if cur := mappingValue(pm, field); cur != nil {
		if cur.Kind != yaml.ScalarNode || cur.Line < 1 || cur.Line > len(lines) {
			return nil, fmt.Errorf("%s:%d:%d: %s: want true or false", file, cur.Line, cur.Column, field)
		}
		ln := lines[cur.Line-1]
		start := cur.Column - 1
		end := start + len(cur.Value)
		if cur.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
			end += 2
		}
		if start < 0 || end > len(ln) || !strings.EqualFold(strings.Trim(string(ln[start:end]), `"'`), cur.Value) {
			return nil, fmt.Errorf("%s:%d:%d: %s: cannot find its value on the line", file, cur.Line, cur.Column, field)
		}
		lines[cur.Line-1] = slicesConcat(ln[:start], []byte(text), ln[end:])
		return bytes.Join(lines, nil), nil
	}
	// Not written: a line after the name's, at the name key's column.
	var key, val *yaml.Node
	for i := 0; i+1 < len(pm.Content); i += 2 {
		if pm.Content[i].Value == "name" {
			key, val = pm.Content[i], pm.Content[i+1]
		}
	}
	if key == nil || val.Line != key.Line || val.Line > len(lines) {
		return nil, fmt.Errorf("%s:%d:%d: pipeline %s: its name is not on one line: set %s: %v in the file yourself",
			file, pm.Line, pm.Column, pipeline, field, v)
	}
	at := val.Line // index of the line after the name's
	if at == len(lines) && !bytes.HasSuffix(lines[at-1], []byte("\n")) {
		lines[at-1] = append(lines[at-1], '\n')
	}
	add := []byte(strings.Repeat(" ", key.Column-1) + field + ": " + text + "\n")
	out := append(append(lines[:at:at], add), lines[at:]...)
	return bytes.Join(out, nil), nil
}

// mappingValue is the value of key in mapping n, nil when n is not a
// mapping or has no such key.
func mappingValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

func slicesConcat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}
