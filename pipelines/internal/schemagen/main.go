// Command schemagen writes the JSON Schema of pipeline files
// (docs/pipeline.schema.json) from package pipelines' Go types and their
// doc comments, so that editors complete and check the fields the loader
// reads. Run it with "go generate ./pipelines"; a test fails when the
// checked-in schema is stale.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	src := flag.String("src", ".", "directory of package pipelines' source (for doc comments)")
	out := flag.String("o", "../docs/pipeline.schema.json", "file to write")
	flag.Parse()
	b, err := generate(*src)
	if err == nil {
		err = os.WriteFile(*out, b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "schemagen:", err)
		os.Exit(1)
	}
}
