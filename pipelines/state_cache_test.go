package pipelines_test

import (
	"strings"
	"testing"

	"github.com/streamrun/streamrun/pipelines"
)

// The state's cache bound defaults to 512 MiB; a negative one, or one
// without state enabled, is refused at its place in the file.
func TestStateCacheBytes(t *testing.T) {
	head := "pipelines:\n  - name: p\n    source: {topics: [in], subscription: s, type: exclusive}\n    handler: {plugin: /p}\n"
	f, err := pipelines.Parse("s.yaml", []byte(head+"    state: {enabled: true}\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Pipelines[0].WithDefaults().State.CacheBytes; got != 512<<20 {
		t.Errorf("default cache_bytes %d, want %d", got, 512<<20)
	}
	f, err = pipelines.Parse("s.yaml", []byte(head+"    state: {enabled: true, cache_bytes: 1000000}\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Pipelines[0].WithDefaults().State.CacheBytes; got != 1000000 {
		t.Errorf("cache_bytes %d, want 1000000", got)
	}
	for _, c := range []struct{ name, yaml, want string }{
		{"negative", "    state:\n      enabled: true\n      cache_bytes: -5\n", "s.yaml:7:20: pipelines[0].state.cache_bytes"},
		{"without enabled", "    state:\n      cache_bytes: 1000\n", "s.yaml:6:7: pipelines[0].state.enabled: is false, and state has settings"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := pipelines.Parse("s.yaml", []byte(head+c.yaml), env(nil))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error:\n%v\nwant it to contain\n%s", err, c.want)
			}
		})
	}
}
