package pipelines

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Load reads the pipeline file at path: Parse, then the checks that need
// the file system (a handler's binary, package, script or interpreter,
// TLS files). Relative paths in the file are taken from the file's
// directory, and come back absolute. lookupEnv supplies ${VAR}; nil means
// os.LookupEnv. The error is an *Error, or Errors when there are several.
func Load(path string, lookupEnv func(string) (string, bool)) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{File: path, Line: 1, Col: 1, Msg: fmt.Sprintf("cannot read: %v", unwrapPath(err))}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, &Error{File: path, Line: 1, Col: 1, Msg: fmt.Sprintf("cannot read: %v", unwrapPath(err))}
	}
	return LoadData(path, data, lookupEnv)
}

// LoadData is Load of data in place of the file's contents at path: the
// same checks, relative paths from path's directory, and errors naming
// path, for a new version of a file before it is written (a reload's dry
// run).
func LoadData(path string, data []byte, lookupEnv func(string) (string, bool)) (*File, error) {
	if len(data) > MaxFileSize {
		return nil, tooLarge(path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, &Error{File: path, Line: 1, Col: 1, Msg: err.Error()}
	}
	file, d, errs := parse(path, filepath.Dir(abs), data, lookupEnv)
	if len(errs) == 0 {
		errs = d.checkFiles(file)
	}
	if len(errs) > 0 {
		return nil, errs.err()
	}
	return file, nil
}

// Parse reads a pipeline file's contents; name is what errors call the
// file, and its directory is where relative paths start. It checks all
// that the text alone can show (Validate included), and nothing on disk.
// lookupEnv supplies ${VAR}; nil means os.LookupEnv.
func Parse(name string, data []byte, lookupEnv func(string) (string, bool)) (*File, error) {
	file, _, errs := parse(name, filepath.Dir(name), data, lookupEnv)
	if len(errs) > 0 {
		return nil, errs.err()
	}
	return file, nil
}

func parse(name, dir string, data []byte, lookupEnv func(string) (string, bool)) (*File, *decoder, Errors) {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	if len(data) > MaxFileSize {
		return nil, nil, Errors{tooLarge(name)}
	}
	if e := checkText(name, data); e != nil {
		return nil, nil, Errors{e}
	}
	if e := checkNesting(name, data); e != nil {
		return nil, nil, Errors{e}
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil && err != io.EOF {
		return nil, nil, Errors{syntaxError(name, data, err)}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, nil, Errors{{File: name, Line: extra.Line, Col: extra.Column, Msg: "a second YAML document (after ---): a pipeline file holds one"}}
	} else if err != io.EOF {
		return nil, nil, Errors{syntaxError(name, data, err)}
	}
	d := &decoder{file: name, lookup: lookupEnv, at: map[string]pos{}, src: data, scalars: map[string]*yaml.Node{}}
	var f File
	top := &doc
	if top.Kind == yaml.DocumentNode && len(top.Content) == 1 {
		top = top.Content[0]
	}
	if top.Kind == 0 || top.Kind == yaml.DocumentNode {
		return nil, nil, Errors{{File: name, Line: 1, Col: 1, Msg: "empty: a pipeline file is a mapping with a pipelines list"}}
	}
	d.at[""] = pos{top.Line, top.Column}
	d.value(top, reflect.ValueOf(&f).Elem(), "", 0)
	if len(d.errs) > 0 {
		return nil, d, d.sorted()
	}
	f.resolve(dir)
	f.places = &places{file: name, at: d.at}
	if err := f.Validate(); err != nil {
		for _, e := range unjoin(err) {
			var fe *FieldError
			if errors.As(e, &fe) {
				d.errAtOffset(fe.Path, fe.Offset, fe.Err.Error())
			} else {
				d.errAt("", e.Error())
			}
		}
		return nil, d, d.sorted()
	}
	return &f, d, nil
}

// errAtOffset records a problem offset characters into the value
// written at path (an expression's), at its own line and column.
func (d *decoder) errAtOffset(path string, offset int, msg string) {
	if n, ok := d.scalars[path]; ok && (offset > 0 || n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0) {
		// The end of the expression is after its last character, not
		// after a block scalar's final line break.
		offset = min(offset, utf8.RuneCountInString(strings.TrimRight(n.Value, " \t\r\n")))
		if line, col, ok := scalarPos(d.src, n, offset); ok {
			d.errs = append(d.errs, &Error{File: d.file, Line: line, Col: col, Path: path, Msg: msg})
			return
		}
	}
	d.errAt(path, msg)
}

// errAt records a problem found after decoding at the place its field
// was written, or its nearest written parent's.
func (d *decoder) errAt(path, msg string) {
	d.errs = append(d.errs, (&places{file: d.file, at: d.at}).errorAt(path, msg))
}

// places is where a file's fields were written: by field path, as
// Error.Path spells it.
type places struct {
	file string
	at   map[string]pos
}

// errorAt is an *Error about the field at path, placed where it was
// written, or its nearest written parent.
func (pl *places) errorAt(path, msg string) *Error {
	p := path
	for {
		if at, ok := pl.at[p]; ok {
			return &Error{File: pl.file, Line: at.line, Col: at.col, Path: path, Msg: msg}
		}
		if p == "" {
			return &Error{File: pl.file, Line: 1, Col: 1, Path: path, Msg: msg}
		}
		p = p[:max(strings.LastIndexAny(p, ".["), 0)]
	}
}

// ErrorAt is an *Error about the field at path (spelt as Error.Path is:
// "pipelines[0].handler.config"), at the place in the file f was read
// from where that field, or its nearest written parent, was written. It
// is for problems found after loading, by what only a running handler
// can tell (a config it refuses, an interpreter without the SDK). A File
// not read by Load or Parse has no places: the error is at line 1,
// column 1 of no file.
func (f *File) ErrorAt(path, msg string) *Error {
	if f.places == nil {
		return (&places{}).errorAt(path, msg)
	}
	return f.places.errorAt(path, msg)
}

func (d *decoder) sorted() Errors {
	es := d.errs
	sort.SliceStable(es, func(i, j int) bool {
		if es[i].Line != es[j].Line {
			return es[i].Line < es[j].Line
		}
		return es[i].Col < es[j].Col
	})
	return es
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func tooLarge(name string) *Error {
	return &Error{File: name, Line: 1, Col: 1, Msg: fmt.Sprintf("larger than %d bytes (1 MiB), the most a pipeline file may hold", MaxFileSize)}
}

// checkText refuses what is not text: invalid UTF-8, NUL bytes and other
// control characters YAML does not allow, with the place of the first.
func checkText(name string, data []byte) *Error {
	if bytes.HasPrefix(data, []byte{0xff, 0xfe}) || bytes.HasPrefix(data, []byte{0xfe, 0xff}) {
		return &Error{File: name, Line: 1, Col: 1, Msg: "UTF-16 text: save the file as UTF-8"}
	}
	line, col := 1, 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		bad := ""
		switch {
		case r == utf8.RuneError && size == 1:
			bad = fmt.Sprintf("byte 0x%02x is not UTF-8: a pipeline file is UTF-8 text", data[i])
		case r == 0:
			bad = "NUL byte: a pipeline file is text, not binary"
		case r < 0x20 && r != '\t' && r != '\n' && r != '\r', r == 0x7f:
			bad = fmt.Sprintf("control character U+%04X: a pipeline file is text (is this a binary file?)", r)
		}
		if bad != "" {
			return &Error{File: name, Line: line, Col: col, Msg: bad}
		}
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
		i += size
	}
	return nil
}

var (
	yamlLine      = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
	unknownAnchor = regexp.MustCompile(`^yaml: unknown anchor '(.*)' referenced$`)
)

// parserProblem reports whether the YAML library's message comes from
// its parser, which numbers lines from 0 (its scanner numbers them from
// 1).
func parserProblem(msg string) bool {
	for _, p := range []string{"did not find expected", "found undefined tag handle", "found duplicate %", "found incompatible YAML document"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// syntaxError turns the YAML parser's error into an *Error. The parser
// reports a line but no column: the column given is that of the line's
// first character, except for a tab in the indentation, which is pointed
// at.
func syntaxError(name string, data []byte, err error) *Error {
	msg := err.Error()
	line := 1
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	} else if m := unknownAnchor.FindStringSubmatch(msg); m != nil {
		// Reported without a place: point at the first use.
		line, col := 1, 1
		if i := bytes.Index(data, []byte("*"+m[1])); i >= 0 {
			line = bytes.Count(data[:i], []byte("\n")) + 1
			col = utf8.RuneCount(data[bytes.LastIndexByte(data[:i], '\n')+1:i]) + 1
		}
		return &Error{File: name, Line: line, Col: col, Msg: fmt.Sprintf("alias *%s names no anchor (&%s) before it", m[1], m[1])}
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	lines := strings.Split(string(data), "\n")
	if parserProblem(msg) {
		// The parser names the line where the construct it was reading
		// began (numbered from 0): find the line that breaks it, in a file
		// small enough to parse a few more times.
		line++
		if len(data) <= bisectLimit {
			line = max(line, breakingLine(lines, err.Error()))
		} else {
			msg += " (in what starts on this line)"
		}
	}
	for _, l := range []int{line, line + 1, line - 1} {
		if l < 1 || l > len(lines) {
			continue
		}
		text := lines[l-1]
		indent := len(text) - len(strings.TrimLeft(text, " \t"))
		if i := strings.IndexByte(text[:indent], '\t'); i >= 0 {
			return &Error{File: name, Line: l, Col: i + 1, Msg: "tab in indentation: YAML indents with spaces"}
		}
	}
	col := 1
	if line >= 1 && line <= len(lines) {
		text := lines[line-1]
		col = utf8.RuneCountInString(text[:len(text)-len(strings.TrimLeft(text, " "))]) + 1
	}
	if line >= 1 && line <= len(lines) && strings.Contains(lines[line-1], "${") && strings.ContainsAny(lines[line-1], "[{") {
		msg += ` (in a [list] or {mapping} written on one line, quote a ${VAR}: "${VAR}")`
	}
	return &Error{File: name, Line: line, Col: col, Msg: "syntax: " + msg}
}

// bisectLimit is the largest file in which a syntax error is looked for
// by parsing prefixes (about 16 parses of at most this much).
const bisectLimit = 64 << 10

// breakingLine is the first line whose addition makes the file fail as
// it does (found by bisection, so a few parses of the file at most); 0
// when there is no such line.
func breakingLine(lines []string, msg string) int {
	fails := func(k int) bool {
		var n yaml.Node
		err := yaml.Unmarshal([]byte(strings.Join(lines[:k], "\n")), &n)
		return err != nil && err.Error() == msg
	}
	lo, hi := 0, len(lines) // fails(hi); look for the first k that does
	if !fails(hi) || fails(lo) {
		return 0
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if fails(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// resolve makes the file's relative paths start at dir. A Go package is
// relative only when it starts with ./ or ../ (else it is an import
// path) and stays in that form; a python of no directory ("python3") is
// looked up in PATH.
func (f *File) resolve(dir string) {
	file := func(p *string) {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	if spec, ok := strings.CutPrefix(f.Auth.Token, "file:"); ok && !strings.HasPrefix(spec, "//") && spec != "" && !filepath.IsAbs(spec) {
		f.Auth.Token = "file:" + filepath.Join(dir, spec)
	}
	file(&f.TLS.CAFile)
	file(&f.TLS.CertFile)
	file(&f.TLS.KeyFile)
	for i := range f.Pipelines {
		h := &f.Pipelines[i].Handler
		file(&h.Plugin)
		file(&h.Script)
		if strings.ContainsRune(h.Python, '/') || strings.ContainsRune(h.Python, filepath.Separator) {
			file(&h.Python)
		}
		if isLocalPackage(h.Package) && !filepath.IsAbs(h.Package) {
			p := filepath.Join(dir, h.Package)
			if !filepath.IsAbs(p) {
				p = "." + string(filepath.Separator) + p
			}
			h.Package = p
		}
	}
}

func isLocalPackage(p string) bool {
	return filepath.IsAbs(p) || p == "." || p == ".." || strings.HasPrefix(p, "./") || strings.HasPrefix(p, "../") ||
		strings.HasPrefix(p, "."+string(filepath.Separator)) || strings.HasPrefix(p, ".."+string(filepath.Separator))
}

// unwrapPath drops the *PathError's repetition of the path.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
