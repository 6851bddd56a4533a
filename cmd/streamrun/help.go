package main

import (
	"embed"
	"strconv"
	"strings"
	"text/template"

	"github.com/streamrun/streamrun"
	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/pool"
)

// The commands' long help texts are documentation, so they are text
// files (help/CMD.txt) that read as the docs do; TestDocsAndTheCLIAgree
// holds them to the docs. What they say that comes from the code (a
// default URL or directory, a limit) is filled in by name, so that the
// two cannot drift apart.

//go:embed help/*.txt
var helpFiles embed.FS

// helpValues are the values a help text names, as {{.Name}}; a help text
// puts the paragraph about waits of the client commands in with
// {{template "waits.txt" .}}.
func helpValues() map[string]string {
	return map[string]string{
		"ServiceURL":    pool.DefaultServiceURL,
		"RunDataDir":    streamrun.DefaultDataDir,
		"StateSpillDir": streamrun.StateSpillDir,
		"BrokerDataDir": broker.DefaultDataDir(),
		"URLCap":        strconv.Itoa(benchURLCap),
	}
}

// helpText is the help of a command, help/NAME.txt with its values
// filled in. Every file is rendered by TestEveryHelpTextRenders, so the
// error is for a file broken in a way that test would catch.
func helpText(name string) string {
	t, err := template.New(name+".txt").Option("missingkey=error").ParseFS(helpFiles, "help/"+name+".txt", "help/waits.txt")
	var b strings.Builder
	if err == nil {
		err = t.Execute(&b, helpValues())
	}
	if err != nil {
		return "streamrun " + name + ": its help text is broken: " + err.Error() + "\n"
	}
	return b.String()
}
