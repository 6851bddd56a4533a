package main

import "github.com/streamrun/streamrun/pipelines"

// loadPipelineFile reads one pipeline file: pipelines.Load, whose errors
// read FILE:LINE:COL: field: what is wrong.
func loadPipelineFile(path string, lookupEnv func(string) (string, bool)) (*pipelines.File, error) {
	return pipelines.Load(path, lookupEnv)
}
