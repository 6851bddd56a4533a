package pipelines

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Limits on what a file may make the loader do, so that a hostile file is
// refused quickly and in bounded memory. They are documented in
// docs/pipelines.md.
const (
	// MaxFileSize is the largest pipeline file read, in bytes (1 MiB; a
	// file of a hundred pipelines is under 50 KiB).
	MaxFileSize = 1 << 20
	// MaxDepth is the deepest nesting of mappings and lists, counted from
	// the top of the file (the fixed fields use 5 levels; the rest is for
	// a handler's config).
	MaxDepth = 64
	// MaxAliasNodes is how many values aliases (*name) may add in all by
	// repeating what their anchors hold; a "billion laughs" file reaches it
	// after a few kilobytes of work.
	MaxAliasNodes = 10_000
	// MaxErrors is how many problems one file reports before it stops
	// looking.
	MaxErrors = 100
)

// ExtensionPrefix starts the top-level keys the loader ignores, so that a
// file can hold values to repeat with anchors and aliases:
//
//	x-handler: &shout {package: ./uppercase, instances: 2}
//	pipelines:
//	  - name: a
//	    handler: *shout
const ExtensionPrefix = "x-"

// pos is a place in a file.
type pos struct{ line, col int }

// decoder fills Go values from a YAML node tree, checking as it goes:
// every problem becomes an *Error at the node's place, and decoding goes
// on with the next field so that one run reports them all.
type decoder struct {
	file   string
	lookup func(string) (string, bool)
	errs   Errors
	// at records where each field path's value was written, so that
	// problems found later by Validate point into the file.
	at map[string]pos
	// src is the file's text and scalars the scalar node written at each
	// path, so that a problem inside a value (an expression's) points at
	// its own line and column (scalarPos).
	src     []byte
	scalars map[string]*yaml.Node
	// aliasNodes counts the values reached through aliases; inAlias says
	// the walk is inside one.
	aliasNodes int
	inAlias    int
	following  map[*yaml.Node]bool             // the anchors' values being walked
	stop       bool                            // a limit was reached: decode no more
	fields     map[reflect.Type]map[string]int // fieldsOf, once per type
}

var durationType = reflect.TypeFor[time.Duration]()

func (d *decoder) fail(n *yaml.Node, path, format string, args ...any) {
	if d.stop {
		return
	}
	if len(d.errs) == MaxErrors {
		d.errs = append(d.errs, &Error{File: d.file, Line: n.Line, Col: n.Column,
			Msg: fmt.Sprintf("more than %d problems; fix these first", MaxErrors)})
		d.stop = true
		return
	}
	if len(path) > maxPathShown {
		// Deep nesting makes paths no one reads whole; the place says where.
		path = path[:maxPathShown/2] + "..." + path[len(path)-maxPathShown/2:]
	}
	d.errs = append(d.errs, &Error{File: d.file, Line: n.Line, Col: n.Column, Path: path, Msg: fmt.Sprintf(format, args...)})
}

const maxPathShown = 100

// follow notes that the walk goes into alias n; false (and an error)
// when n is inside the value it names, which would never end.
func (d *decoder) follow(n *yaml.Node, path string) bool {
	if n.Alias == nil {
		return true // enter reports it
	}
	if d.following[n.Alias] {
		d.fail(n, path, "alias *%s is inside the value it names", n.Value)
		return false
	}
	if d.following == nil {
		d.following = map[*yaml.Node]bool{}
	}
	d.following[n.Alias] = true
	d.inAlias++
	return true
}

func (d *decoder) unfollow(n *yaml.Node) {
	if n.Alias != nil {
		delete(d.following, n.Alias)
		d.inAlias--
	}
}

// enter follows an alias and counts what the walk costs; false when the
// walk must not go into n.
func (d *decoder) enter(n **yaml.Node, path string, depth int) bool {
	if d.stop {
		return false
	}
	if depth > MaxDepth {
		d.fail(*n, path, "nested deeper than %d levels", MaxDepth)
		d.stop = true
		return false
	}
	if (*n).Kind == yaml.AliasNode {
		if (*n).Alias == nil {
			d.fail(*n, path, "alias *%s names no anchor", (*n).Value)
			return false
		}
		*n = (*n).Alias
	}
	if d.inAlias > 0 {
		d.aliasNodes++
		if d.aliasNodes > MaxAliasNodes {
			d.fail(*n, path, "aliases repeat more than %d values (an alias bomb?)", MaxAliasNodes)
			d.stop = true
			return false
		}
	}
	return true
}

// value decodes n into v, the field at path.
func (d *decoder) value(n *yaml.Node, v reflect.Value, path string, depth int) {
	if n.Kind == yaml.AliasNode {
		if !d.follow(n, path) {
			return
		}
		defer d.unfollow(n)
	}
	if path != "" {
		if _, seen := d.at[path]; !seen {
			d.at[path] = pos{n.Line, n.Column}
			if n.Kind == yaml.ScalarNode && d.scalars != nil {
				d.scalars[path] = n
			}
		}
	}
	if !d.enter(&n, path, depth) {
		return
	}
	if !d.checkTag(n, path) {
		return
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return // null, ~ or nothing: the zero value, whatever the type
	}
	d.into(n, v, path, depth)
}

// scalarForm is a struct that may also be written as a word (a Step:
// "handler").
type scalarForm interface {
	fromScalar(s string) bool
}

// into decodes n, neither an alias nor null, into v, by v's type.
func (d *decoder) into(n *yaml.Node, v reflect.Value, path string, depth int) {
	if sf, ok := v.Addr().Interface().(scalarForm); ok && v.Kind() == reflect.Struct && n.Kind == yaml.ScalarNode {
		if s, ok := d.scalar(n, path, "a mapping"); ok && !sf.fromScalar(s) {
			d.fail(n, path, "%q: want a mapping (key: value lines), or %s", s, HandlerMarker)
		}
		return
	}
	switch {
	case v.Type() == durationType:
		d.duration(n, v, path)
	case v.Kind() == reflect.String:
		if s, ok := d.scalar(n, path, "a string"); ok {
			v.SetString(s)
		}
	case v.Kind() == reflect.Int:
		d.integer(n, v, path)
	case v.Kind() == reflect.Float64 || v.Kind() == reflect.Float32:
		d.number(n, v, path)
	case v.Kind() == reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		d.value(n, p.Elem(), path, depth)
		v.Set(p)
	case v.Kind() == reflect.Bool:
		d.boolean(n, v, path)
	case v.Kind() == reflect.Struct:
		d.structure(n, v, path, depth)
	case v.Kind() == reflect.Slice:
		d.list(n, v, path, depth)
	case v.Kind() == reflect.Map && v.Type().Key().Kind() == reflect.String:
		d.mapping(n, v, path, depth)
	case v.Kind() == reflect.Interface:
		if x, ok := d.anyValue(n, path, depth); ok && x != nil {
			v.Set(reflect.ValueOf(x))
		}
	default:
		// A field of a type this decoder was not taught; a test decodes
		// every field, so this is a bug, not bad input.
		d.fail(n, path, "cannot decode into %s", v.Type())
	}
}

// duration decodes a time.Duration, which needs its unit: a bare number
// is refused with the units it might have meant.
func (d *decoder) duration(n *yaml.Node, v reflect.Value, path string) {
	s, ok := d.scalar(n, path, "a duration such as 5s or 250ms")
	if !ok {
		return
	}
	dur, err := time.ParseDuration(s)
	if err != nil {
		if _, numErr := strconv.ParseFloat(s, 64); numErr == nil {
			d.fail(n, path, "%s: a duration needs a unit, such as %ss or %sms", s, s, s)
		} else {
			d.fail(n, path, "%q: want a duration such as 5s, 250ms or 1m30s", s)
		}
		return
	}
	v.SetInt(int64(dur))
}

// integer decodes an int (decimal, 0x, 0o or 0b) that fits in one.
func (d *decoder) integer(n *yaml.Node, v reflect.Value, path string) {
	s, ok := d.scalar(n, path, "an integer")
	if !ok {
		return
	}
	i, err := strconv.ParseInt(s, 0, 64)
	if err != nil || i != int64(int(i)) {
		d.fail(n, path, "%q: want an integer", s)
		return
	}
	v.SetInt(i)
}

// number decodes a finite float.
func (d *decoder) number(n *yaml.Node, v reflect.Value, path string) {
	s, ok := d.scalar(n, path, "a number")
	if !ok {
		return
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		d.fail(n, path, "%q: want a number", s)
		return
	}
	v.SetFloat(f)
}

// boolean decodes true or false, in the three spellings YAML 1.2 allows.
func (d *decoder) boolean(n *yaml.Node, v reflect.Value, path string) {
	s, ok := d.scalar(n, path, "true or false")
	if !ok {
		return
	}
	switch s {
	case "true", "True", "TRUE":
		v.SetBool(true)
	case "false", "False", "FALSE":
		v.SetBool(false)
	default:
		d.fail(n, path, "%q: want true or false", s)
	}
}

// list decodes a sequence into a slice, an item a level deeper.
func (d *decoder) list(n *yaml.Node, v reflect.Value, path string, depth int) {
	if n.Kind != yaml.SequenceNode {
		d.fail(n, path, "want a list, got %s", kindName(n))
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		d.value(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i), depth+1)
	}
	v.Set(s)
}

// checkTag refuses explicit tags other than YAML's core ones: a custom
// tag would otherwise be silently ignored.
func (d *decoder) checkTag(n *yaml.Node, path string) bool {
	if n.Tag == "" || n.Tag == "!" || n.Style&yaml.TaggedStyle == 0 {
		return true
	}
	switch n.ShortTag() {
	case "!!str", "!!int", "!!float", "!!bool", "!!null", "!!map", "!!seq":
		return true
	}
	d.fail(n, path, "tag %s is not supported (only !!str, !!int, !!float, !!bool, !!null, !!map and !!seq)", n.Tag)
	return false
}

// scalar is n's text with variables expanded; false (and an error) when
// n is not a scalar or expansion fails.
func (d *decoder) scalar(n *yaml.Node, path, want string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		d.fail(n, path, "want %s, got %s", want, kindName(n))
		return "", false
	}
	s, err := expand(n.Value, d.lookup)
	if err != nil {
		d.fail(n, path, "%v", err)
		return "", false
	}
	return s, true
}

// pairs checks that n is a mapping with scalar keys each written once,
// and calls f with each key and value.
func (d *decoder) pairs(n *yaml.Node, path string, f func(key string, k, v *yaml.Node)) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "want a mapping (key: value lines), got %s", kindName(n))
		return
	}
	first := map[string]int{}
	for i := 0; i+1 < len(n.Content) && !d.stop; i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.AliasNode && k.Alias != nil {
			k = k.Alias
		}
		if k.Kind != yaml.ScalarNode {
			d.fail(k, path, "a key must be a plain name, not %s", kindName(k))
			continue
		}
		if k.Tag == "!!merge" || k.ShortTag() == "!!merge" {
			d.fail(k, path, "merge keys (<<) are not supported; repeat the fields or use an alias for the whole value")
			continue
		}
		if line, dup := first[k.Value]; dup {
			d.fail(k, join(path, k.Value), "duplicate key %q (first at line %d)", k.Value, line)
			continue
		}
		first[k.Value] = k.Line
		f(k.Value, k, v)
	}
}

func (d *decoder) structure(n *yaml.Node, v reflect.Value, path string, depth int) {
	fields, ok := d.fields[v.Type()]
	if !ok {
		fields = fieldsOf(v.Type())
		if d.fields == nil {
			d.fields = map[reflect.Type]map[string]int{}
		}
		d.fields[v.Type()] = fields
	}
	d.pairs(n, path, func(key string, k, val *yaml.Node) {
		i, ok := fields[key]
		if !ok && path == "" && strings.HasPrefix(key, ExtensionPrefix) {
			return // a place for anchors, read by no one
		}
		if !ok {
			d.fail(k, join(path, key), "unknown field%s", suggest(key, fields))
			return
		}
		d.value(val, v.Field(i), join(path, key), depth+1)
	})
}

func (d *decoder) mapping(n *yaml.Node, v reflect.Value, path string, depth int) {
	m := reflect.MakeMap(v.Type())
	d.pairs(n, path, func(key string, _, val *yaml.Node) {
		e := reflect.New(v.Type().Elem()).Elem()
		d.value(val, e, join(path, key), depth+1)
		m.SetMapIndex(reflect.ValueOf(key), e)
	})
	v.Set(m)
}

// anyValue decodes free-form YAML (a handler's config) into the values
// encoding/json takes: map[string]any, []any, string, bool, int, float64
// and nil. A plain scalar holding ${...} is expanded, then read as YAML
// reads a plain scalar (so ${PORT} can be a number); a quoted one stays a
// string.
func (d *decoder) anyValue(n *yaml.Node, path string, depth int) (any, bool) {
	switch n.Kind {
	case yaml.MappingNode:
		m := map[string]any{}
		d.pairs(n, path, func(key string, _, val *yaml.Node) {
			if x, ok := d.child(val, join(path, key), depth+1); ok {
				m[key] = x
			}
		})
		return m, true
	case yaml.SequenceNode:
		l := make([]any, 0, len(n.Content))
		for i, item := range n.Content {
			if x, ok := d.child(item, fmt.Sprintf("%s[%d]", path, i), depth+1); ok {
				l = append(l, x)
			}
		}
		return l, true
	case yaml.ScalarNode:
	default:
		d.fail(n, path, "unexpected %s", kindName(n))
		return nil, false
	}
	s, err := expand(n.Value, d.lookup)
	if err != nil {
		d.fail(n, path, "%v", err)
		return nil, false
	}
	if s != n.Value && (s == "" || n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0) {
		return s, true // quoted, or expanded to nothing: a string
	}
	if s != n.Value {
		n = &yaml.Node{Kind: yaml.ScalarNode, Value: s, Line: n.Line, Column: n.Column}
	}
	switch n.ShortTag() {
	case "!!str", "!!timestamp", "!!binary":
		return n.Value, true
	}
	var x any
	if err := n.Decode(&x); err != nil {
		d.fail(n, path, "%q: %v", n.Value, err)
		return nil, false
	}
	if f, ok := x.(float64); ok && (math.IsInf(f, 0) || math.IsNaN(f)) {
		d.fail(n, path, "%s: infinities and NaN cannot be handed to a handler as JSON", n.Value)
		return nil, false
	}
	return x, true
}

// child is anyValue after the checks value makes on the way in.
func (d *decoder) child(n *yaml.Node, path string, depth int) (any, bool) {
	if n.Kind == yaml.AliasNode {
		if !d.follow(n, path) {
			return nil, false
		}
		defer d.unfollow(n)
	}
	if !d.enter(&n, path, depth) || !d.checkTag(n, path) {
		return nil, false
	}
	return d.anyValue(n, path, depth)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!int":
			return "the number " + n.Value
		case "!!float":
			return "the number " + n.Value
		case "!!bool":
			return n.Value
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "nothing"
}

// fieldsOf maps the yaml names of t's fields to their index.
func fieldsOf(t reflect.Type) map[string]int {
	m := map[string]int{}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name != "" && name != "-" {
			m[name] = i
		}
	}
	return m
}

// suggest names the field key was probably meant to be, or lists them.
func suggest(key string, fields map[string]int) string {
	if len(key) > 64 {
		return ""
	}
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	sort.Strings(names)
	best, bestD := "", 3
	for _, n := range names {
		if dist := editDistance(strings.ToLower(key), n); dist < bestD {
			best, bestD = n, dist
		}
	}
	if best != "" {
		return fmt.Sprintf(" (did you mean %s?)", best)
	}
	return " (want one of " + strings.Join(names, ", ") + ")"
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
