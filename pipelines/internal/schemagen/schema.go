package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/streamrun/streamrun/pipelines"
)

// schema is a JSON Schema (draft-07, the draft editors support best).
type schema = map[string]any

// variable is a ${VAR} or ${VAR:-default} where a number, a boolean or a
// duration goes: the loader expands it before reading the value.
const variable = `\$\{[A-Za-z_][A-Za-z0-9_]*(:-[^}]*)?\}`

// Rules the types cannot say: fields of which exactly one is set.
var oneOf = map[string][]string{
	"Source": {"topics", "pattern"},
	"Step":   {"filter", "map", "route", "dead_letter_if"},
}

// Fields of which at most one is set: a handler has one of these, or
// none in a pipeline of steps alone (which only the loader can tell).
var atMostOne = map[string][]string{
	"Handler": {"plugin", "package", "script"},
}

// Rules across fields of a struct: a pipeline has a handler program or
// steps (or both).
var across = map[string]schema{
	"Pipeline": {"anyOf": []any{
		schema{"required": []string{"steps"}},
		schema{"required": []string{"handler"}, "properties": schema{"handler": schema{"anyOf": []any{
			schema{"required": []string{"plugin"}}, schema{"required": []string{"package"}}, schema{"required": []string{"script"}},
		}}}},
	}},
}

// Words a struct may be written as instead of a mapping (a step:
// "handler", the handler's place).
var scalarForms = map[reflect.Type][]string{
	reflect.TypeFor[pipelines.Step](): {pipelines.HandlerMarker},
}

// Enumerations, as the loader reads them: canonical spellings first (for
// completion), any case with '_', '-' or ' ' between letters allowed.
var enums = map[reflect.Type][]string{
	reflect.TypeFor[pipelines.SubscriptionType](): {"shared", "exclusive", "failover", "key_shared"},
	reflect.TypeFor[pipelines.InitialPosition]():  {"latest", "earliest"},
	reflect.TypeFor[pipelines.Guarantee]():        {"at_least_once", "exactly_once"},
	reflect.TypeFor[pipelines.WindowType]():       {"tumbling", "sliding", "session"},
	reflect.TypeFor[pipelines.WindowTime]():       {"processing", "publish", "event", "field"},
}

type generator struct {
	docs map[string]map[string]string // type name -> field name -> doc ("" for the type's own)
	defs schema
}

func generate(srcDir string) ([]byte, error) {
	docs, err := readDocs(srcDir)
	if err != nil {
		return nil, err
	}
	g := &generator{docs: docs, defs: schema{}}
	top := g.object(reflect.TypeFor[pipelines.File]())
	top["$schema"] = "http://json-schema.org/draft-07/schema#"
	top["$id"] = "https://github.com/streamrun/streamrun/docs/pipeline.schema.json"
	top["title"] = "streamrun pipeline file"
	g.defs["variable"] = schema{"type": "string", "pattern": variable,
		"description": "${VAR} or ${VAR:-default}: expanded from the environment when the file is read"}
	top["patternProperties"] = schema{"^" + pipelines.ExtensionPrefix: schema{
		"description": "ignored: a place for values repeated with anchors (&name) and aliases (*name)"}}
	top["definitions"] = g.defs
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(top); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// object is the schema of struct t, its fields described by their doc
// comments with Go field names replaced by the names in the file.
func (g *generator) object(t reflect.Type) schema {
	props := schema{}
	var required []string
	names := map[string]string{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		names[f.Name] = name
		if !strings.Contains(opts, "omitempty") {
			required = append(required, name)
		}
	}
	prevDoc := ""
	for i := range t.NumField() {
		f := t.Field(i)
		name, ok := names[f.Name]
		if !ok {
			continue
		}
		s := g.typeSchema(f.Type)
		doc := g.docs[t.Name()][f.Name]
		if doc == "" {
			doc = prevDoc // fields declared under one comment
		}
		prevDoc = doc
		if doc != "" {
			if _, isRef := s["$ref"]; isRef {
				s = schema{"allOf": []any{s}} // draft-07 ignores what stands beside a $ref
			}
			s["description"] = rename(doc, names)
		}
		if def := f.Tag.Get("default"); def != "" {
			s["default"] = defaultValue(f.Type, def)
			s["description"] = strings.TrimSpace(fmt.Sprint(s["description"]) + " Default " + def + ".")
		}
		props[name] = s
	}
	s := schema{"type": "object", "additionalProperties": false, "properties": props}
	if doc := g.docs[t.Name()][""]; doc != "" {
		s["description"] = rename(doc, names)
	}
	if len(required) > 0 {
		s["required"] = required
	}
	if fields := oneOf[t.Name()]; fields != nil {
		var alts []any
		for _, f := range fields {
			alts = append(alts, schema{"required": []string{f}})
		}
		s["oneOf"] = alts
	}
	if fields := atMostOne[t.Name()]; fields != nil {
		var pairs []any
		for i, a := range fields {
			for _, b := range fields[i+1:] {
				pairs = append(pairs, schema{"required": []string{a, b}})
			}
		}
		s["not"] = schema{"anyOf": pairs}
	}
	for k, v := range across[t.Name()] {
		s[k] = v
	}
	return s
}

var durationType = reflect.TypeFor[time.Duration]()

func (g *generator) typeSchema(t reflect.Type) schema {
	if words, ok := enums[t]; ok {
		var pats []string
		for _, w := range words {
			pats = append(pats, loosePattern(w))
		}
		return schema{"anyOf": []any{
			schema{"enum": words},
			schema{"type": "string", "pattern": "^(" + strings.Join(pats, "|") + ")$"},
			varRef(),
		}}
	}
	switch {
	case t == durationType:
		return schema{"type": "string", "pattern": `^(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h))+$|` + variable,
			"examples": []string{"10ms", "5s", "1m30s"}}
	case t.Kind() == reflect.String:
		return schema{"type": "string"}
	case t.Kind() == reflect.Int:
		return schema{"anyOf": []any{schema{"type": "integer", "minimum": 0}, varRef()}}
	case t.Kind() == reflect.Float64 || t.Kind() == reflect.Float32:
		return schema{"anyOf": []any{schema{"type": "number"}, varRef()}}
	case t.Kind() == reflect.Pointer:
		return g.typeSchema(t.Elem())
	case t.Kind() == reflect.Bool:
		return schema{"anyOf": []any{schema{"type": "boolean"}, varRef()}}
	case t.Kind() == reflect.Slice:
		return schema{"type": "array", "items": g.typeSchema(t.Elem())}
	case t.Kind() == reflect.Map && t.Elem().Kind() == reflect.String:
		return schema{"type": "object", "additionalProperties": schema{"type": "string"}}
	case t.Kind() == reflect.Map:
		return schema{"type": "object"}
	case t.Kind() == reflect.Struct:
		if _, done := g.defs[t.Name()]; !done {
			g.defs[t.Name()] = nil // a recursive type would stop here
			g.defs[t.Name()] = g.object(t)
		}
		ref := schema{"$ref": "#/definitions/" + t.Name()}
		if words := scalarForms[t]; words != nil {
			return schema{"anyOf": []any{ref, schema{"enum": words}}}
		}
		return ref
	}
	panic(fmt.Sprintf("schemagen: no schema for %s", t))
}

// defaultValue is a default tag as the schema writes it: a number for an
// integer field, else the text.
func defaultValue(t reflect.Type, def string) any {
	if t.Kind() == reflect.Int {
		if n, err := strconv.Atoi(def); err == nil {
			return n
		}
	}
	return def
}

func varRef() schema { return schema{"$ref": "#/definitions/variable"} }

// loosePattern matches w in any case, with '_', '-' or ' ' between its
// letters, as the loader reads it.
func loosePattern(w string) string {
	var b strings.Builder
	for i, r := range strings.ReplaceAll(w, "_", "") {
		if i > 0 {
			b.WriteString("[-_ ]*")
		}
		fmt.Fprintf(&b, "[%c%c]", r, r-'a'+'A')
	}
	return b.String()
}

var goName = regexp.MustCompile(`\b[A-Z][A-Za-z]*\b`)

// rename puts the file's names for the struct's Go field names in doc,
// and joins its lines into paragraphs.
func rename(doc string, names map[string]string) string {
	doc = goName.ReplaceAllStringFunc(doc, func(w string) string {
		if n, ok := names[w]; ok {
			return n
		}
		return w
	})
	paras := strings.Split(strings.TrimSpace(doc), "\n\n")
	for i, p := range paras {
		paras[i] = strings.Join(strings.Fields(p), " ")
	}
	return strings.Join(paras, "\n\n")
}

// readDocs reads the doc comments of the structs and fields in dir.
func readDocs(dir string) (map[string]map[string]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	docs := map[string]map[string]string{}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					continue
				}
				m := map[string]string{}
				if doc := ts.Doc; doc != nil {
					m[""] = doc.Text()
				} else if gd.Doc != nil {
					m[""] = gd.Doc.Text()
				}
				for _, field := range st.Fields.List {
					for _, n := range field.Names {
						m[n.Name] = field.Doc.Text()
					}
				}
				docs[ts.Name.Name] = m
			}
		}
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("no struct types in %s", dir)
	}
	return docs, nil
}
