package pipelinetest

import (
	"encoding/xml"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// FileSuffixes end the names of test files found in a directory.
var FileSuffixes = []string{"_test.yaml", "_test.yml"}

// Find lists the test files args name: a file as it is, a directory
// walked for files named *_test.yaml or *_test.yml (directories whose
// names start with "." or "_" and testdata skipped, as go test does),
// in lexical order. A directory holding none is an error. No args is
// the current directory, as for go test.
func Find(args []string) ([]string, error) {
	if len(args) == 0 {
		args = []string{"."}
	}
	var files []string
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", a, unwrapPath(err))
		}
		if !st.IsDir() {
			files = append(files, a)
			continue
		}
		var found []string
		err = filepath.WalkDir(a, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			name := d.Name()
			if d.IsDir() {
				if p != a && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
					return filepath.SkipDir
				}
				return nil
			}
			for _, s := range FileSuffixes {
				if strings.HasSuffix(name, s) {
					found = append(found, p)
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", a, err)
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("%s: no test files (*_test.yaml) in it", a)
		}
		sort.Strings(found)
		files = append(files, found...)
	}
	return files, nil
}

// WriteResult writes r as go test writes a test's: "ok" or "FAIL", the
// file, the case and the time, then each failure indented below.
func WriteResult(w io.Writer, r Result) {
	status := "ok  "
	if !r.Passed() {
		status = "FAIL"
	}
	fmt.Fprintf(w, "%s  %s: %s (%.2fs)\n", status, r.File, r.Case, r.Took.Seconds())
	for _, f := range r.Failures {
		fmt.Fprintf(w, "        %s\n", strings.ReplaceAll(f, "\n", "\n        "))
	}
}

// JUnit XML, as CI systems read it: a testsuite per file, a testcase per
// case, a failure holding the failures' text.
type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	ClassName string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// WriteJUnitFile writes results as JUnit XML to the file at path,
// made or truncated.
func WriteJUnitFile(path string, results []Result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := WriteJUnit(f, results); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// WriteJUnit writes results as JUnit XML.
func WriteJUnit(w io.Writer, results []Result) error {
	var out junitSuites
	index := map[string]int{}
	for _, r := range results {
		i, ok := index[r.File]
		if !ok {
			i = len(out.Suites)
			index[r.File] = i
			out.Suites = append(out.Suites, junitSuite{Name: r.File})
		}
		s := &out.Suites[i]
		c := junitCase{Name: r.Case, ClassName: r.File, Time: fmt.Sprintf("%.3f", r.Took.Seconds())}
		if !r.Passed() {
			s.Failures++
			first, _, _ := strings.Cut(r.Failures[0], "\n")
			c.Failure = &junitFailure{Message: first, Text: strings.Join(r.Failures, "\n")}
		}
		s.Tests++
		s.Cases = append(s.Cases, c)
	}
	for i := range out.Suites {
		var total float64
		for _, c := range out.Suites[i].Cases {
			var t float64
			fmt.Sscanf(c.Time, "%g", &t)
			total += t
		}
		out.Suites[i].Time = fmt.Sprintf("%.3f", total)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
