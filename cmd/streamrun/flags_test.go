package main

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// flagLine is a flag's line in a command's help: "  -q, --quiet ..." or
// "      --url ...".
var flagLine = regexp.MustCompile(`(?m)^\s+(?:-([a-zA-Z]), )?--([a-z0-9-]+)`)

// helpFlags returns the flags a help text lists: long name to its short
// one ("" for none).
func helpFlags(help string) map[string]string {
	out := map[string]string{}
	for _, m := range flagLine.FindAllStringSubmatch(help, -1) {
		out[m[2]] = m[1]
	}
	return out
}

// everyHelp is the help of every command, and of every subcommand that
// has a help of its own, by the words that ask for it.
func everyHelp(t *testing.T) map[string]string {
	t.Helper()
	helps := map[string]string{}
	ask := func(args ...string) {
		code, out, errs := runArgs(append(args, "--help")...)
		if code != 0 {
			t.Fatalf("%v --help: exit %d: %s", args, code, errs)
		}
		helps[strings.Join(args, " ")] = out
	}
	for _, c := range commands() {
		ask(c.name)
	}
	for _, sub := range []string{"produce", "consume", "pipeline"} {
		ask("bench", sub)
	}
	return helps
}

// A short flag means one long flag in every command, and a long flag
// that has a short one somewhere has it everywhere: -q is --quiet, -s
// --subscription, -r --rate, wherever the command has them.
func TestShortFlagsMeanOneThingEverywhere(t *testing.T) {
	helps := everyHelp(t)
	longOf := map[string]map[string][]string{} // short -> long -> commands
	shortOf := map[string]string{}             // long -> its short, where it has one
	for _, cmd := range slices.Sorted(maps.Keys(helps)) {
		for long, short := range helpFlags(helps[cmd]) {
			if short == "" {
				continue
			}
			if longOf[short] == nil {
				longOf[short] = map[string][]string{}
			}
			longOf[short][long] = append(longOf[short][long], cmd)
			shortOf[long] = short
		}
	}
	for short, longs := range longOf {
		if len(longs) > 1 {
			t.Errorf("-%s means different flags: %v", short, longs)
		}
	}
	for _, cmd := range slices.Sorted(maps.Keys(helps)) {
		for long, short := range helpFlags(helps[cmd]) {
			if want := shortOf[long]; want != "" && short != want {
				t.Errorf("%s: --%s has no -%s, as elsewhere", cmd, long, want)
			}
		}
	}
	// What a newcomer typed: the quiet flag of produce, on consume.
	if code, _, errs := runArgs("consume", "-q", "-t", "x", "-s", "s", "--count", "-1"); code != 2 || strings.Contains(errs, "unknown shorthand") {
		t.Errorf("consume -q: exit %d, %q; want it taken (and --count refused)", code, errs)
	}
}

// The help of a command with subcommands lists them and their flags:
// `streamrun help bench` names each subcommand and every flag any of
// them takes, under the subcommands that take it.
func TestHelpOfACommandWithSubcommandsListsTheirFlags(t *testing.T) {
	code, out, errs := runArgs("help", "bench")
	if code != 0 || errs != "" {
		t.Fatalf("help bench: exit %d, %q", code, errs)
	}
	for _, sub := range []string{"produce", "consume", "pipeline"} {
		if !regexp.MustCompile(`(?m)^  ` + sub + `\s`).MatchString(out) {
			t.Errorf("help bench does not list the subcommand %s:\n%s", sub, out)
		}
		_, subHelp, _ := runArgs("bench", sub, "--help")
		listed := helpFlags(out)
		for long := range helpFlags(subHelp) {
			if _, ok := listed[long]; !ok {
				t.Errorf("help bench does not list --%s of bench %s", long, sub)
			}
		}
	}
	for _, want := range []string{"Flags of every subcommand:", "Flags of consume and pipeline:", "Flags of pipeline:"} {
		if !strings.Contains(out, want) {
			t.Errorf("help bench has no %q", want)
		}
	}
}
