package pipelinetest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"
)

// The checks, and the text a mismatch is told in: a diff of one line per
// message, "-" what was expected, "+" what came.

// maxDiffLines is the most lines of a diff shown: a pipeline gone
// wrong (one reading its own outputs) can send thousands.
const maxDiffLines = 20

// compareOutputs says how got differs from the messages want expects on
// its topic; nothing when it does not.
func compareOutputs(want TopicOutputs, got []output) []string {
	var lines []string
	asJSON, props := false, false
	for _, m := range want.Messages {
		asJSON = asJSON || m.JSON != nil || m.JSONContains != nil
		props = props || len(m.Properties) > 0
	}
	order := "in order"
	if want.Order == OrderAny {
		order = "any order"
		used := make([]bool, len(got))
		for _, w := range want.Messages {
			found := false
			for j, g := range got {
				if !used[j] && matches(w, g) {
					used[j], found = true, true
					break
				}
			}
			if !found {
				lines = append(lines, "- "+describeWant(w))
			}
		}
		for j, g := range got {
			if !used[j] {
				lines = append(lines, "+ "+describeGot(g, asJSON, props))
			}
		}
	} else {
		for i := range max(len(want.Messages), len(got)) {
			switch {
			case i >= len(got):
				lines = append(lines, fmt.Sprintf("- #%d %s", i+1, describeWant(want.Messages[i])))
			case i >= len(want.Messages):
				lines = append(lines, fmt.Sprintf("+ #%d %s", i+1, describeGot(got[i], asJSON, props)))
			case !matches(want.Messages[i], got[i]):
				lines = append(lines, fmt.Sprintf("- #%d %s", i+1, describeWant(want.Messages[i])),
					fmt.Sprintf("+ #%d %s", i+1, describeGot(got[i], asJSON, props)))
			}
		}
	}
	if len(lines) == 0 {
		return nil
	}
	if len(lines) > maxDiffLines {
		lines = append(lines[:maxDiffLines], fmt.Sprintf("... and %d more lines", len(lines)-maxDiffLines))
	}
	head := fmt.Sprintf("outputs to %s (%s): want %d, got %d; -want +got:", want.Topic, order, len(want.Messages), len(got))
	return []string{head + "\n    " + strings.Join(lines, "\n    ")}
}

// matches reports whether g is what w expects.
func matches(w Message, g output) bool {
	if w.Key != nil && *w.Key != g.key {
		return false
	}
	for k, v := range w.Properties {
		if gv, ok := g.properties[k]; !ok || gv != v {
			return false
		}
	}
	switch {
	case w.Text != nil:
		return string(g.payload) == *w.Text
	case w.Base64 != nil:
		b, _ := base64.StdEncoding.DecodeString(*w.Base64) // checked by Load
		return bytes.Equal(b, g.payload)
	case w.JSON != nil:
		gv, ok := decodeJSON(g.payload)
		return ok && reflect.DeepEqual(normalize(w.JSON), gv)
	case w.JSONContains != nil:
		gv, ok := decodeJSON(g.payload)
		return ok && contains(normalize(w.JSONContains), gv)
	}
	return true
}

func decodeJSON(b []byte) (any, bool) {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, false
	}
	return v, true
}

// normalize is v as JSON decodes it (numbers float64, mappings
// map[string]any), so that it compares with a decoded payload.
func normalize(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	n, _ := decodeJSON(b)
	return n
}

// contains reports whether got holds want: every key of a mapping, with
// a value holding want's; a list as long, item by item; else equal.
func contains(want, got any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok || !contains(wv, gv) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !contains(w[i], g[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(want, got)
}

func describeWant(w Message) string {
	var parts []string
	if w.Key != nil {
		parts = append(parts, fmt.Sprintf("key %q", *w.Key))
	}
	if len(w.Properties) > 0 {
		parts = append(parts, "properties "+describeProps(w.Properties))
	}
	switch {
	case w.Text != nil:
		parts = append(parts, fmt.Sprintf("text %q", *w.Text))
	case w.Base64 != nil:
		parts = append(parts, "base64 "+*w.Base64)
	case w.JSON != nil:
		parts = append(parts, "json "+compactJSON(w.JSON))
	case w.JSONContains != nil:
		parts = append(parts, "json_contains "+compactJSON(w.JSONContains))
	}
	if len(parts) == 0 {
		return "any message"
	}
	return strings.Join(parts, " ")
}

// describeGot writes a received message the way the expectations are
// written: its payload as JSON when they are, else as text (base64 when
// it is not UTF-8).
func describeGot(g output, asJSON, props bool) string {
	var parts []string
	if g.key != "" {
		parts = append(parts, fmt.Sprintf("key %q", g.key))
	}
	if props && len(g.properties) > 0 {
		parts = append(parts, "properties "+describeProps(g.properties))
	}
	if v, ok := decodeJSON(g.payload); asJSON && ok {
		parts = append(parts, "json "+compactJSON(v))
	} else if utf8.Valid(g.payload) {
		parts = append(parts, fmt.Sprintf("text %q", g.payload))
	} else {
		parts = append(parts, "base64 "+base64.StdEncoding.EncodeToString(g.payload))
	}
	return strings.Join(parts, " ")
}

func describeProps(p map[string]string) string {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %q", k, p[k])
	}
	b.WriteByte('}')
	return b.String()
}

func compactJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// compareState says how the state after the case differs from want.
func compareState(want map[string]any, got map[string][]byte) []string {
	keys := map[string]bool{}
	for k := range want {
		keys[k] = true
	}
	for k := range got {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var lines []string
	for _, k := range sorted {
		w, inWant := want[k]
		g, inGot := got[k]
		switch {
		case !inGot:
			lines = append(lines, fmt.Sprintf("- %s: %s", k, describeValue(w)))
		case !inWant:
			lines = append(lines, fmt.Sprintf("+ %s: %q", k, g))
		case !sameValue(w, g):
			lines = append(lines, fmt.Sprintf("- %s: %s", k, describeValue(w)), fmt.Sprintf("+ %s: %q", k, g))
		}
	}
	if len(lines) == 0 {
		return nil
	}
	return []string{"state after: -want +got:\n    " + strings.Join(lines, "\n    ")}
}

// sameValue: a string is the value's bytes; anything else is compared
// as JSON.
func sameValue(want any, got []byte) bool {
	if s, ok := want.(string); ok {
		return s == string(got)
	}
	gv, ok := decodeJSON(got)
	return ok && reflect.DeepEqual(normalize(want), gv)
}

func describeValue(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return compactJSON(v)
}

// mustMatch reports whether re, checked by Load, matches s.
func mustMatch(re, s string) bool {
	return regexp.MustCompile(re).MatchString(s)
}
