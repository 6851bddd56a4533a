package pipelines_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/streamrun/streamrun/pipelines"
)

// Whatever the input, Parse returns a file or errors that each have a
// place; it never panics.
func FuzzParse(f *testing.F) {
	for _, glob := range []string{"../examples/pipelines/*.yaml", "../cmd/streamrun/testdata/validate/*.yaml"} {
		paths, _ := filepath.Glob(glob)
		for _, p := range paths {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(b)
			}
		}
	}
	f.Add([]byte(full))
	lookup := env(map[string]string{"A": "1", "URL": "pulsar://h:6650", "N": "2"})
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := pipelines.Parse("f.yaml", data, lookup)
		if err == nil {
			if file == nil || len(file.Pipelines) == 0 {
				t.Fatalf("no error and no pipelines: %+v", file)
			}
			return
		}
		var es pipelines.Errors
		var one *pipelines.Error
		switch {
		case errors.As(err, &es):
		case errors.As(err, &one):
			es = pipelines.Errors{one}
		default:
			t.Fatalf("error of type %T: %v", err, err)
		}
		for _, e := range es {
			if e.File != "f.yaml" || e.Line < 1 || e.Col < 1 || e.Msg == "" {
				t.Fatalf("error without a place: %+v", *e)
			}
		}
	})
}
