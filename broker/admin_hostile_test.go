package broker_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// hostileAdmin is a broker on a data directory holding a tenant, a
// namespace and a topic with messages a subscription has not consumed: what
// hostile admin requests must leave intact.
type hostileAdmin struct {
	c      *broker.Cluster
	base   string // .../admin/v2
	parent string // the data directory's parent: nothing may appear there
	keep   []string
}

const hostileTopic = "persistent://acme/ns/keep"

func startHostileAdmin(t *testing.T) *hostileAdmin {
	parent := t.TempDir()
	c := brokertest.Start(t, func(o *broker.Options) {
		o.Memory = false
		o.DataDir = filepath.Join(parent, "data")
	})
	h := &hostileAdmin{c: c, base: c.AdminURL() + "/admin/v2", parent: parent}
	adminDo(t, "PUT", h.base+"/tenants/acme", `{"allowedClusters":["standalone"]}`, 204)
	adminDo(t, "PUT", h.base+"/namespaces/acme/ns", "", 204)
	p := dial(t, c.ServiceURL())
	p.subscribe(hostileTopic, "s", pb.CommandSubscribe_Shared, earliest)
	pid := p.producer(hostileTopic)
	for i := range 10 {
		h.keep = append(h.keep, fmt.Sprintf("kept %d", i))
		p.publish(pid, uint64(i), msg{payload: h.keep[i]})
	}
	p.close()
	h.intact(t, "setup")
	return h
}

// intact checks that the tenant, namespace, topic and its unconsumed
// messages are all still there, and that nothing was written outside the
// data directory.
func (h *hostileAdmin) intact(t *testing.T, after string) {
	t.Helper()
	if got := adminDo(t, "GET", h.base+"/tenants", "", 200); !strings.Contains(got, `"acme"`) {
		t.Fatalf("after %s: tenant acme gone: %s", after, got)
	}
	if got := adminDo(t, "GET", h.base+"/namespaces/acme", "", 200); !strings.Contains(got, `"acme/ns"`) {
		t.Fatalf("after %s: namespace gone: %s", after, got)
	}
	var st struct {
		Subscriptions map[string]struct {
			MsgBacklog int64 `json:"msgBacklog"`
		} `json:"subscriptions"`
	}
	if err := json.Unmarshal([]byte(adminDo(t, "GET", h.base+"/persistent/acme/ns/keep/stats", "", 200)), &st); err != nil {
		t.Fatal(err)
	}
	if got := st.Subscriptions["s"].MsgBacklog; got != int64(len(h.keep)) {
		t.Fatalf("after %s: backlog of s is %d, want %d", after, got, len(h.keep))
	}
	entries, err := os.ReadDir(h.parent)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "data" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("after %s: the data directory's parent holds %v, want only data", after, names)
	}
}

// drain consumes the topic and checks every kept message is there.
func (h *hostileAdmin) drain(t *testing.T) {
	p := dial(t, h.c.ServiceURL())
	cid := p.subscribe(hostileTopic, "s", pb.CommandSubscribe_Shared)
	p.flow(cid, 100)
	for _, want := range h.keep {
		if m := p.receive(cid); m.payload != want {
			t.Fatalf("got %q, want %q", m.payload, want)
		}
	}
}

// raw sends a request without following redirects and returns status and body.
func raw(t *testing.T, method, url string, body io.Reader, length int64) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = length
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func wantStatus(t *testing.T, what string, code int, body string, want int, reason string) {
	t.Helper()
	if code != want || !strings.Contains(body, reason) {
		t.Errorf("%s: %d %s, want %d with %q", what, code, strings.TrimSpace(body), want, reason)
	}
}

// A body over the limit gets 413 whether it announced its length or came
// chunked; the broker reads no more of it and loses nothing.
func TestAdminRefusesHugeBodies(t *testing.T) {
	h := startHostileAdmin(t)
	huge := strings.Repeat("7", 2<<20)
	code, body := raw(t, "PUT", h.base+"/persistent/acme/ns/big/partitions", strings.NewReader(huge), int64(len(huge)))
	wantStatus(t, "announced 2 MiB", code, body, 413, "limit is 1048576 bytes")
	// Chunked: no Content-Length; the limit stops the read.
	code, body = raw(t, "PUT", h.base+"/tenants/acme2", io.MultiReader(strings.NewReader(`{"adminRoles":["`), strings.NewReader(huge), strings.NewReader(`"]}`)), -1)
	wantStatus(t, "chunked 2 MiB", code, body, 413, "Request body too large")
	adminDo(t, "GET", h.base+"/tenants/acme2", "", 404)
	adminDo(t, "GET", h.base+"/persistent/acme/ns/big/partitions", "", 200) // {"partitions":0}: not created
	h.intact(t, "huge bodies")
	h.drain(t)
}

// Malformed JSON and fields of the wrong type get 400 saying what is wrong
// and where; nothing is created or changed.
func TestAdminRefusesBadJSON(t *testing.T) {
	h := startHostileAdmin(t)
	for _, tc := range []struct {
		method, path, body, reason string
	}{
		{"PUT", "/tenants/other", `{"adminRoles": [`, "malformed JSON at byte"},
		{"PUT", "/tenants/other", `{"allowedClusters": 5}`, `allowedClusters`},
		{"POST", "/tenants/acme", `not json`, "Invalid tenant info: malformed JSON at byte 2"},
		{"PUT", "/namespaces/acme/other", `{"bundles": }`, "Invalid namespace policies: malformed JSON"},
		{"PUT", "/persistent/acme/ns/keep/subscription/other", `{"ledgerId": 1,`, "Invalid message id"},
		{"POST", "/persistent/acme/ns/keep/subscription/s/resetcursor", `{"ledgerId": "x"}`, "Invalid message id"},
		{"PUT", "/persistent/acme/ns/parted/partitions", `{"n": 3}`, "must be a number"},
	} {
		code, body := raw(t, tc.method, h.base+tc.path, strings.NewReader(tc.body), int64(len(tc.body)))
		wantStatus(t, tc.method+" "+tc.path+" "+tc.body, code, body, 400, tc.reason)
	}
	adminDo(t, "GET", h.base+"/tenants/other", "", 404)
	if got := adminDo(t, "GET", h.base+"/namespaces/acme", "", 200); strings.Contains(got, "other") {
		t.Errorf("namespace created from bad JSON: %s", got)
	}
	if got := adminDo(t, "GET", h.base+"/persistent/acme/ns/keep/subscriptions", "", 200); strings.Contains(got, "other") {
		t.Errorf("subscription created from bad JSON: %s", got)
	}
	h.intact(t, "bad JSON")
	h.drain(t)
}

// Path steps, NUL and other control characters and over-long names in the
// path are refused (412, or the router's redirect (307) to the cleaned path
// for a literal ..); nothing is deleted, created or written outside the data
// directory.
func TestAdminRefusesHostileNames(t *testing.T) {
	h := startHostileAdmin(t)
	long := strings.Repeat("x", 1100)
	for _, tc := range []struct {
		method, path string
		want         int
		reason       string
	}{
		// A literal .. never reaches a handler: the router redirects to the
		// cleaned path, which the client must request itself.
		{"DELETE", "/persistent/acme/ns/../../tenants/acme", 307, ""},
		{"DELETE", "/persistent/acme/%2e%2e/keep?force=true", 412, "Invalid namespace name"},
		{"DELETE", "/persistent/acme/ns/%2e%2e?force=true", 412, "Invalid topic name"},
		{"DELETE", "/persistent/acme/ns/%2e%2e%2fns%2fkeep?force=true", 412, "has '/'"},
		{"PUT", "/persistent/acme/ns/%2e", 412, "Invalid topic name"},
		{"PUT", "/persistent/%2e%2e/%2e%2e/escape", 412, "Invalid tenant name"},
		{"PUT", "/tenants/%2e%2e", 412, "Invalid tenant name"},
		{"PUT", "/tenants/a%2fb", 412, "Invalid tenant name"},
		{"PUT", "/namespaces/acme/%2e%2e", 412, "Invalid namespace name"},
		{"PUT", "/persistent/acme/ns/a%00b", 412, "control character"},
		{"PUT", "/tenants/a%00b", 412, "Invalid tenant name"},
		{"PUT", "/persistent/acme/ns/keep/subscription/a%00b", 412, "Invalid subscription name"},
		{"PUT", "/persistent/acme/ns/keep/subscription/%2e%2e", 412, "Invalid subscription name"},
		{"PUT", "/persistent/acme/ns/" + long, 412, "the limit is 1024"},
		{"PUT", "/tenants/" + long[:300], 412, "300 bytes, the limit is 255"},
		{"POST", "/persistent/acme/ns/keep/subscription/s/skip_all/../../../../../../keep", 307, ""},
	} {
		code, body := raw(t, tc.method, h.base+tc.path, nil, 0)
		wantStatus(t, tc.method+" "+tc.path, code, body, tc.want, tc.reason)
	}
	h.intact(t, "hostile names")
	h.drain(t)
}
