package main

// The docs' list of commands kept true: every command and subcommand the
// CLI has is documented, every `streamrun CMD [SUB]` the docs show
// exists, no doc calls an existing command unbuilt, and every test the
// docs name as proof exists. The checks read the CLI itself (commands()
// and each command's --help) and the repository's markdown; their rules
// are in docProblems, and TestDocChecksCatch shows each one failing.

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// cliShape is what the CLI offers: its commands, the subcommands each
// command's --help lists (which must be documented), and the ones its
// help only mentions as `streamrun CMD SUB` (internal ones such as
// `bench handler`, which the docs may name but need not).
type cliShape struct {
	commands  []string
	subs      map[string][]string
	mentioned map[string][]string
}

// has reports whether cmd (and sub, when not "") exists.
func (c cliShape) has(cmd, sub string) bool {
	if cmd == "help" && sub == "" {
		return true
	}
	if !slices.Contains(c.commands, cmd) {
		return false
	}
	return sub == "" || slices.Contains(c.subs[cmd], sub) || slices.Contains(c.mentioned[cmd], sub)
}

// doc is one markdown file of the repository.
type doc struct {
	path string // relative to the repository, with slashes
	text string
}

// theCLI reads the CLI's shape from commands() and each command's --help.
func theCLI(t *testing.T) cliShape {
	t.Helper()
	c := cliShape{subs: map[string][]string{}, mentioned: map[string][]string{}}
	for _, cmd := range commands() {
		var out, errs bytes.Buffer
		if code := run(context.Background(), []string{cmd.name, "--help"}, &out, &errs); code != 0 {
			t.Fatalf("streamrun %s --help: exit %d\n%s", cmd.name, code, errs.String())
		}
		c.commands = append(c.commands, cmd.name)
		c.subs[cmd.name] = helpSubcommands(cmd.name, out.String())
		for _, m := range codeMentions(out.String()) {
			if m.cmd == cmd.name && m.sub != "" {
				c.mentioned[cmd.name] = append(c.mentioned[cmd.name], m.sub)
			}
		}
	}
	return c
}

var (
	// "Usage: streamrun bench produce|consume|pipeline [flags]"
	usageAlternatives = regexp.MustCompile(`(?m)^Usage: streamrun (\S+) ([a-z][a-z0-9-]*(?:\|[a-z][a-z0-9-]*)+)(?:\s|$)`)
	// a line of a "Subcommands:" block: two spaces, then the name
	subcommandLine = regexp.MustCompile(`^  ([a-z][a-z0-9-]*)(?:\s|$)`)
)

// helpSubcommands returns the subcommands a command's help lists: the
// alternatives of its usage line ("Usage: streamrun CMD a|b|c"), and the
// names of a "Subcommands:" block (each line two spaces in, up to a blank
// line).
func helpSubcommands(cmd, help string) []string {
	var subs []string
	for _, m := range usageAlternatives.FindAllStringSubmatch(help, -1) {
		if m[1] == cmd {
			subs = append(subs, strings.Split(m[2], "|")...)
		}
	}
	in := false
	for _, line := range strings.Split(help, "\n") {
		switch {
		case strings.TrimSpace(line) == "Subcommands:":
			in = true
		case in && strings.TrimSpace(line) == "":
			in = false
		case in:
			if m := subcommandLine.FindStringSubmatch(line); m != nil {
				subs = append(subs, m[1])
			}
		}
	}
	slices.Sort(subs)
	return slices.Compact(subs)
}

// theDocs reads README.md, docs/**/*.md and every other README.md of the
// repository (test data and virtual environments left out).
func theDocs(t *testing.T) []doc {
	t.Helper()
	var docs []doc
	root := repoRoot(t)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch d.Name() {
			case ".git", "testdata", "node_modules", "vendor", ".venv", "venv", "__pycache__":
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() == "README.md" || (strings.HasPrefix(rel, "docs/") && strings.HasSuffix(rel, ".md")) {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			docs = append(docs, doc{path: rel, text: string(b)})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) < 3 {
		t.Fatalf("found %d docs under %s: the walk is wrong", len(docs), root)
	}
	return docs
}

// mention is `streamrun CMD [SUB]` in a doc's code.
type mention struct {
	line     int
	cmd, sub string
}

var (
	// streamrun as a command word (at the start, after a space, a path's
	// slash or shell punctuation), then one or two lowercase words on
	// the same line.
	commandUse = regexp.MustCompile(`(?:^|[\s/$(|;&])streamrun[ \t]+([a-z][a-z0-9-]*)(?:[ \t]+([a-z][a-z0-9-]*))?`)
	codeSpan   = regexp.MustCompile("`[^`]+`")
	// a shell comment in a code block
	shellComment = regexp.MustCompile(`(?:^|\s)#.*$`)
)

// codeMentions finds `streamrun CMD [SUB]` in the code of a markdown
// text: fenced blocks (shell comments left out) and inline code spans.
// Prose is not read: there "streamrun" is the project's name.
func codeMentions(text string) []mention {
	var ms []mention
	fenced := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		var code []string
		if fenced {
			code = []string{shellComment.ReplaceAllString(line, "")}
		} else {
			code = codeSpan.FindAllString(line, -1)
		}
		for _, c := range code {
			for _, m := range commandUse.FindAllStringSubmatch(strings.Trim(c, "`"), -1) {
				ms = append(ms, mention{line: i + 1, cmd: m[1], sub: m[2]})
			}
		}
	}
	return ms
}

// section returns the lines of a markdown text from the heading that
// starts with heading up to the next heading of the same level, and the
// number of the heading's line (0 when there is no such heading).
func section(text, heading string) (string, int) {
	level := heading[:strings.IndexByte(heading, ' ')+1]
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, heading) {
			continue
		}
		for j := i + 1; j < len(lines); j++ {
			if strings.HasPrefix(lines[j], level) {
				return strings.Join(lines[i:j], "\n"), i + 1
			}
		}
		return strings.Join(lines[i:], "\n"), i + 1
	}
	return "", 0
}

// Where a command's documentation goes; docProblems' messages name them.
const (
	readmeList      = "README.md"
	readmeHeading   = "## The command line"
	contractDoc     = "docs/contract.md"
	contractHeading = "## §9"
)

// unbuilt is what a doc says of something promised and not delivered.
var unbuilt = regexp.MustCompile(`(?i)not built|not yet built|not implemented|not yet implemented|planned|coming soon|\bTODO\b`)

// docProblems checks the docs against the CLI:
//
//  1. every command is on README.md's command list (a `./streamrun CMD`
//     line under "## The command line") and named in docs/contract.md §9;
//  2. every subcommand a command's --help lists is shown as
//     `streamrun CMD SUB` in some doc;
//  3. every `streamrun CMD [SUB]` a doc shows exists;
//  4. no paragraph or table row that names a command (`CMD` or
//     `streamrun CMD` in code) calls it unbuilt ("not built yet", ...).
//
// Each problem is a sentence telling the reader what to write and where.
func docProblems(cli cliShape, docs []doc) []string {
	var problems []string
	byPath := map[string]string{}
	for _, d := range docs {
		byPath[d.path] = d.text
	}

	// 1. Commands on the README's list and in the contract's §9.
	list, _ := section(byPath[readmeList], readmeHeading)
	listed := map[string]bool{}
	for _, m := range codeMentions(list) {
		listed[m.cmd] = true
	}
	contract, _ := section(byPath[contractDoc], contractHeading)
	for _, cmd := range cli.commands {
		if !listed[cmd] {
			problems = append(problems, fmt.Sprintf(
				"streamrun %[1]s is a command (cmd/streamrun/main.go, commands()) missing from %[2]s's command list: "+
					"add a line \"./streamrun %[1]s ...   # what it does\" to the code block under %[3]q in %[2]s",
				cmd, readmeList, readmeHeading))
		}
		if !namesCommand(contract, cmd) {
			problems = append(problems, fmt.Sprintf(
				"streamrun %[1]s is a command (cmd/streamrun/main.go, commands()) that %[2]s %[3]s does not name: "+
					"add a row \"| `%[1]s`: what it promises | cmd/streamrun/%[1]s.go | the tests that prove it |\" to %[3]s of %[2]s",
				cmd, contractDoc, strings.TrimPrefix(contractHeading, "## ")))
		}
	}

	// 2. Subcommands shown somewhere; 3. every mention exists.
	shown := map[string]int{} // "cmd sub" -> times shown
	docOf := map[string]map[string]int{}
	for _, d := range docs {
		for _, m := range codeMentions(d.text) {
			if !cli.has(m.cmd, "") {
				problems = append(problems, fmt.Sprintf(
					"%s:%d shows \"streamrun %s\", which is not a command of the CLI (its commands: %s): correct the doc, or remove the line",
					d.path, m.line, m.cmd, strings.Join(cli.commands, ", ")))
				continue
			}
			if len(cli.subs[m.cmd]) == 0 || m.sub == "" {
				continue // no subcommands: the next word is an argument
			}
			if !cli.has(m.cmd, m.sub) {
				problems = append(problems, fmt.Sprintf(
					"%s:%d shows \"streamrun %s %s\", which is not a subcommand of streamrun %s (its subcommands: %s): correct the doc, or remove the line",
					d.path, m.line, m.cmd, m.sub, m.cmd, strings.Join(cli.subs[m.cmd], ", ")))
				continue
			}
			shown[m.cmd+" "+m.sub]++
			if docOf[m.cmd] == nil {
				docOf[m.cmd] = map[string]int{}
			}
			docOf[m.cmd][d.path]++
		}
	}
	for _, cmd := range cli.commands {
		for _, sub := range cli.subs[cmd] {
			if shown[cmd+" "+sub] > 0 {
				continue
			}
			where := "the docs/ page of its area"
			if best := mostMentions(docOf[cmd]); best != "" {
				where = best + ", beside its other subcommands"
			}
			problems = append(problems, fmt.Sprintf(
				"streamrun %[1]s %[2]s is a subcommand ('streamrun %[1]s --help' lists it) that no doc shows: "+
					"add \"streamrun %[1]s %[2]s ...\" to a code block in %[3]s, with what it does",
				cmd, sub, where))
		}
	}

	// 4. A command called unbuilt.
	for _, d := range docs {
		for _, p := range paragraphs(d.text) {
			if !unbuilt.MatchString(p.text) {
				continue
			}
			for _, cmd := range cli.commands {
				if namesCommand(p.text, cmd) {
					problems = append(problems, fmt.Sprintf(
						"%s:%d says %q of `%s`, which the CLI has: say what it does, where it lives and the test that proves it",
						d.path, p.line, unbuilt.FindString(p.text), cmd))
				}
			}
		}
	}
	return problems
}

// namesCommand reports whether text has a code span that starts with
// the command, bare or after "streamrun": `validate`, `validate FILE...`,
// `streamrun validate x.yaml`.
func namesCommand(text, cmd string) bool {
	for _, span := range codeSpan.FindAllString(text, -1) {
		span = strings.TrimPrefix(strings.Trim(span, "`"), "streamrun ")
		if span == cmd || strings.HasPrefix(span, cmd+" ") {
			return true
		}
	}
	return false
}

// mostMentions returns the path with the highest count ("" for none),
// the first by name on a tie.
func mostMentions(counts map[string]int) string {
	best, n := "", 0
	paths := make([]string, 0, len(counts))
	for p := range counts {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if counts[p] > n {
			best, n = p, counts[p]
		}
	}
	return best
}

// paragraph is a block of prose or a table row, and its first line.
type paragraph struct {
	line int
	text string
}

// paragraphs splits markdown into blank-line separated blocks, each table
// row a block of its own; fenced code is left out.
func paragraphs(text string) []paragraph {
	var ps []paragraph
	var cur []string
	start, fenced := 0, false
	flush := func() {
		if len(cur) > 0 {
			ps = append(ps, paragraph{line: start, text: strings.Join(cur, "\n")})
		}
		cur = nil
	}
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "```"):
			flush()
			fenced = !fenced
		case fenced:
		case trimmed == "":
			flush()
		case strings.HasPrefix(trimmed, "|"):
			flush()
			ps = append(ps, paragraph{line: i + 1, text: line})
		default:
			if len(cur) == 0 {
				start = i + 1
			}
			cur = append(cur, line)
		}
	}
	flush()
	return ps
}

// The repository's docs and the CLI agree (rules: docProblems).
func TestDocsAndTheCLIAgree(t *testing.T) {
	for _, p := range docProblems(theCLI(t), theDocs(t)) {
		t.Error(p)
	}
}

// What the CLI looks like to the checks: a change here that loses
// commands or subcommands would make TestDocsAndTheCLIAgree pass for
// nothing.
func TestTheChecksSeeTheCLI(t *testing.T) {
	cli := theCLI(t)
	for _, want := range []struct{ cmd, sub string }{
		{"run", ""}, {"validate", ""}, {"bench", "produce"}, {"bench", "pipeline"},
		{"bench", "handler"}, {"topics", "list"}, {"topics", "reset-cursor"},
	} {
		if !cli.has(want.cmd, want.sub) {
			t.Errorf("the checks do not see streamrun %s %s (commands %v, subcommands %v, mentioned %v)",
				want.cmd, want.sub, cli.commands, cli.subs, cli.mentioned)
		}
	}
	if slices.Contains(cli.subs["bench"], "handler") {
		t.Errorf("bench handler is internal and need not be documented, yet it is listed: %v", cli.subs["bench"])
	}
	var total int
	for _, d := range theDocs(t) {
		total += len(codeMentions(d.text))
	}
	if total < 50 {
		t.Errorf("the docs show streamrun commands %d times: the reading of code is wrong", total)
	}
}

// Each rule of docProblems, failing on docs that break it: what another
// helper sees when they add a command or a subcommand without docs.
func TestDocChecksCatch(t *testing.T) {
	cli := cliShape{
		commands:  []string{"run", "topics"},
		subs:      map[string][]string{"topics": {"list", "stats"}},
		mentioned: map[string][]string{},
	}
	readme := "# x\n\n" + readmeHeading + "\n\n```sh\n./streamrun run p.yaml   # run it\n./streamrun topics list\n```\n\n## Next\n"
	contract := "# c\n\n" + contractHeading + " cmd\n\n| `run` | run.go | TestRun |\n| `topics` | topics.go | TestTopics |\n"
	admin := "# admin\n\n```sh\nstreamrun topics list\nstreamrun topics stats orders\n```\n"
	good := []doc{{readmeList, readme}, {contractDoc, contract}, {"docs/admin.md", admin}}
	with := func(extra ...doc) []doc { return append(slices.Clone(good), extra...) }
	withCmd := func(name string, subs ...string) cliShape {
		c := cliShape{commands: append(slices.Clone(cli.commands), name), subs: map[string][]string{}, mentioned: map[string][]string{}}
		for k, v := range cli.subs {
			c.subs[k] = v
		}
		c.subs[name] = subs
		return c
	}

	for _, tc := range []struct {
		name string
		cli  cliShape
		docs []doc
		want []string // each a part of one problem; none: no problem
	}{
		{name: "docs that agree", cli: cli, docs: good},
		{
			name: "a command added without docs",
			cli:  withCmd("state"),
			docs: good,
			want: []string{
				`streamrun state is a command (cmd/streamrun/main.go, commands()) missing from README.md's command list: add a line "./streamrun state ...   # what it does" to the code block under "## The command line" in README.md`,
				"streamrun state is a command (cmd/streamrun/main.go, commands()) that docs/contract.md §9 does not name: add a row \"| `state`: what it promises | cmd/streamrun/state.go | the tests that prove it |\" to §9 of docs/contract.md",
			},
		},
		{
			name: "a command with subcommands, its subcommands undocumented",
			cli:  withCmd("ctl", "pause", "resume"),
			docs: []doc{
				{readmeList, strings.Replace(readme, "```\n\n## Next", "./streamrun ctl pause NAME\n```\n\n## Next", 1)},
				{contractDoc, contract + "| `ctl` | ctl.go | TestCtl |\n"},
				{"docs/admin.md", admin},
			},
			want: []string{`streamrun ctl resume is a subcommand ('streamrun ctl --help' lists it) that no doc shows: add "streamrun ctl resume ..." to a code block in README.md, beside its other subcommands, with what it does`},
		},
		{
			name: "a subcommand added without docs",
			cli:  cliShape{commands: cli.commands, subs: map[string][]string{"topics": {"list", "stats", "compact"}}},
			docs: good,
			want: []string{`streamrun topics compact is a subcommand ('streamrun topics --help' lists it) that no doc shows: add "streamrun topics compact ..." to a code block in docs/admin.md, beside its other subcommands`},
		},
		{
			name: "a doc shows a command the CLI does not have",
			cli:  cli,
			docs: with(doc{"docs/run.md", "Run `streamrun start p.yaml` to begin.\n"}),
			want: []string{`docs/run.md:1 shows "streamrun start", which is not a command of the CLI (its commands: run, topics)`},
		},
		{
			name: "a doc shows a subcommand the CLI does not have",
			cli:  cli,
			docs: with(doc{"docs/ops.md", "# ops\n\n```sh\nstreamrun topics purge orders   # gone\n```\n"}),
			want: []string{`docs/ops.md:4 shows "streamrun topics purge", which is not a subcommand of streamrun topics (its subcommands: list, stats)`},
		},
		{
			name: "a doc calls an existing command not built",
			cli:  cli,
			docs: with(doc{"docs/plan.md", "# plan\n\n| `run`, `topics`. | *not built yet* | — |\n"}),
			want: []string{
				"docs/plan.md:3 says \"not built\" of `run`, which the CLI has",
				"docs/plan.md:3 says \"not built\" of `topics`, which the CLI has",
			},
		},
		{
			name: "prose and comments are not commands",
			cli:  cli,
			docs: with(doc{"docs/why.md", "streamrun runs pipelines; streamrun is fast.\n\n```sh\ngo build -o streamrun ./cmd/streamrun   # streamrun builds here\n```\n\nThe `cmd/streamrun/run.go` file.\n"}),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := docProblems(tc.cli, tc.docs)
			if len(got) != len(tc.want) {
				t.Fatalf("%d problems, want %d:\n%s", len(got), len(tc.want), strings.Join(got, "\n"))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d:\n got %s\nwant it to hold %s", i, got[i], w)
				}
			}
		})
	}
}

// The subcommands of a command are read from either shape of its help.
func TestHelpSubcommands(t *testing.T) {
	for _, tc := range []struct {
		cmd, help string
		want      []string
	}{
		{"bench", "Usage: streamrun bench produce|consume|pipeline [flags]\n\n(`streamrun bench handler` is internal.)\n", []string{"consume", "pipeline", "produce"}},
		{"topics", "Usage: streamrun topics SUBCOMMAND [ARGS] [flags]\n\nSubcommands:\n  list [NS]     topics\n  reset-cursor TOPIC --to X\n                move a subscription\n\nFlags:\n  -o, --output string\n", []string{"list", "reset-cursor"}},
		{"run", "Usage: streamrun run [flags] FILE...\n\nFlags:\n  --memory\n", nil},
		{"version", "Usage: streamrun version [--output text|json]\n", nil},
	} {
		if got := helpSubcommands(tc.cmd, tc.help); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.cmd, got, tc.want)
		}
	}
}

// Every test, fuzz target, benchmark or example a doc names (in code, as
// the proof of a rule) is defined in the repository: a renamed or removed
// test makes the doc that cites it wrong.
func TestDocsNameOnlyTestsThatExist(t *testing.T) {
	defined := map[string]bool{}
	def := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark|Example)\w*)\(`)
	err := filepath.WalkDir(repoRoot(t), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == ".venv" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, "_test.go") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range def.FindAllSubmatch(b, -1) {
				defined[string(m[1])] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	named := regexp.MustCompile("`((?:Test|Fuzz|Benchmark)[A-Z][A-Za-z0-9_]*)`")
	for _, d := range theDocs(t) {
		for i, line := range strings.Split(d.text, "\n") {
			for _, m := range named.FindAllStringSubmatch(line, -1) {
				if !defined[m[1]] {
					t.Errorf("%s:%d names %s, which no _test.go of the repository defines: name the test that proves it now", d.path, i+1, m[1])
				}
			}
		}
	}
}
