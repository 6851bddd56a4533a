package control

import (
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// openapi.yaml describes every route the server has, and no other: the
// same paths and methods, and for each route the statuses its handler
// can answer with.
func TestTheOpenAPIFileDescribesEveryRoute(t *testing.T) {
	var doc struct {
		Servers []struct{ URL string }
		Paths   map[string]map[string]struct {
			Responses map[string]any
		}
	}
	if err := yaml.Unmarshal(openAPIFile, &doc); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	if len(doc.Servers) != 1 || doc.Servers[0].URL != APIPrefix {
		t.Errorf("servers: %+v, want %s", doc.Servers, APIPrefix)
	}
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			key := strings.ToUpper(method) + " " + path
			documented[key] = true
			if _, ok := op.Responses["200"]; !ok {
				t.Errorf("%s: no 200 response documented", key)
			}
		}
	}
	served := map[string]bool{}
	for _, rt := range routes {
		key := rt.method + " " + rt.path
		served[key] = true
		if !documented[key] {
			t.Errorf("%s is served and not in openapi.yaml", key)
		}
	}
	for key := range documented {
		if !served[key] {
			t.Errorf("%s is in openapi.yaml and not served", key)
		}
	}
	// The statuses every route can answer with are documented on it.
	for _, rt := range routes {
		op := doc.Paths[rt.path][strings.ToLower(rt.method)]
		var codes []string
		for c := range op.Responses {
			codes = append(codes, c)
		}
		want := []string{"200", "401"}
		if rt.changes {
			want = append(want, "403")
		}
		if strings.Contains(rt.path, "{name}") {
			want = append(want, "404")
		}
		for _, c := range want {
			if !slices.Contains(codes, c) {
				t.Errorf("%s %s: %s not documented (has %v)", rt.method, rt.path, c, codes)
			}
		}
	}
}
