package main

import (
	"bytes"
	"os"
	"testing"
)

// The checked-in schema is the one the Go types make; regenerate it with
// "go generate ./pipelines" after changing them.
func TestSchemaIsCurrent(t *testing.T) {
	got, err := generate("../..")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../../../docs/pipeline.schema.json")
	if err != nil {
		t.Fatalf("%v: run go generate ./pipelines", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("docs/pipeline.schema.json is stale: run go generate ./pipelines")
	}
}
