package control_test

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/streamrun/streamrun/control"
)

// The console is served by the host with everything it loads: each file
// the page references (scripts, styles, icons) and each API route the
// script calls answer from the host, with the right types, and the
// page's Content-Security-Policy allows nothing from elsewhere.
func TestTheConsoleServesEverythingItReferences(t *testing.T) {
	h := startHost(t, control.Options{})
	root := strings.TrimSuffix(h.srv.URL(), "/")
	get := func(path string) (*http.Response, string) {
		t.Helper()
		resp, err := h.c.Get(root + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, page := get("/")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("/: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Errorf("Content-Security-Policy: %q", csp)
	}
	refs := regexp.MustCompile(`(?:src|href)="([^"#]+)"`).FindAllStringSubmatch(page, -1)
	if len(refs) < 3 {
		t.Fatalf("the page references %v", refs)
	}
	types := map[string]string{".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}
	var scripts []string
	for _, m := range refs {
		ref := m[1]
		if strings.Contains(ref, "://") || strings.HasPrefix(ref, "//") {
			t.Errorf("the page loads %s from elsewhere", ref)
			continue
		}
		resp, body := get("/" + strings.TrimPrefix(ref, "/"))
		if resp.StatusCode != http.StatusOK || body == "" {
			t.Errorf("%s: %d", ref, resp.StatusCode)
		}
		for ext, typ := range types {
			if strings.HasSuffix(ref, ext) && !strings.HasPrefix(resp.Header.Get("Content-Type"), typ) {
				t.Errorf("%s: Content-Type %q, want %s", ref, resp.Header.Get("Content-Type"), typ)
			}
		}
		if strings.HasSuffix(ref, ".js") {
			scripts = append(scripts, body)
		}
	}
	if len(scripts) == 0 {
		t.Fatal("the page has no script")
	}
	// Every API path the script calls is a route the host answers (with
	// a pipeline's name where it takes one).
	calls := regexp.MustCompile(`"(/(?:pipelines|files|reload)[^"]*)"`).FindAllStringSubmatch(strings.Join(scripts, "\n"), -1)
	if len(calls) < 4 {
		t.Fatalf("the script calls %v", calls)
	}
	for _, c := range calls {
		path := c[1]
		if strings.HasSuffix(path, "/") {
			path += "up" // "/pipelines/" + name
		}
		method := "GET"
		if strings.HasPrefix(path, "/reload") || strings.HasSuffix(path, "/pause") || strings.HasSuffix(path, "/resume") {
			method = "POST"
		}
		if path == "/pause" || path == "/resume" {
			path = "/pipelines/up" + path
		}
		if path == "/tap?rate=5" {
			continue // a stream: TestTheTapShowsAMessageJustProduced
		}
		code, body := h.do(method, path, map[string]any{"content": ""})
		if code == http.StatusNotFound || code == http.StatusMethodNotAllowed {
			t.Errorf("the script calls %s %s: %d %s", method, path, code, body)
		}
	}
	// Nothing else is served as the console's.
	if resp, _ := get("/nothing.js"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("/nothing.js: %d", resp.StatusCode)
	}
}
