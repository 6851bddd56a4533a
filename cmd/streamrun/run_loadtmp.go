package main

// TEMPORARY: a plain loader until pipelines.Load lands from the yaml
// work; run_load.go calls loadPipelineFile only.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/streamrun/streamrun/pipelines"
)

func loadPipelineFile(path string, lookupEnv func(string) (string, bool)) (*pipelines.File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	b = []byte(os.Expand(string(b), func(k string) string { v, _ := lookupEnv(k); return v }))
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var f pipelines.File
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	dir, _ := filepath.Abs(filepath.Dir(path))
	for i := range f.Pipelines {
		h := &f.Pipelines[i].Handler
		if strings.HasPrefix(h.Package, ".") {
			h.Package = filepath.Join(dir, h.Package)
		}
		if h.Plugin != "" && !filepath.IsAbs(h.Plugin) {
			h.Plugin = filepath.Join(dir, h.Plugin)
		}
	}
	return &f, nil
}
