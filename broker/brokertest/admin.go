package brokertest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// AdminDo sends one request to the peer's admin REST API (path from
// /admin/v2/...; body JSON, or "" for none) and returns the response
// body, failing the test on a transport error or a status outside 2xx.
// It waits a minute at most. The connection is not kept, so no idle
// connection outlives the test.
func (p *Peer) AdminDo(t testing.TB, method, path, body string) []byte {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, p.Admin+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %s: %s", method, path, resp.Status, out)
	}
	return out
}

// AdminPath is the admin API path of a topic's full name:
// persistent://t/ns/x is /admin/v2/persistent/t/ns/x.
func AdminPath(topic string) string {
	return "/admin/v2/" + strings.Replace(topic, "://", "/", 1)
}

// CreatePartitioned creates topic (a full name) with n partitions.
func (p *Peer) CreatePartitioned(t testing.TB, topic string, n int) {
	t.Helper()
	p.AdminDo(t, http.MethodPut, AdminPath(topic)+"/partitions", fmt.Sprint(n))
}

// UpdatePartitions raises topic's partition count to n.
func (p *Peer) UpdatePartitions(t testing.TB, topic string, n int) {
	t.Helper()
	p.AdminDo(t, http.MethodPost, AdminPath(topic)+"/partitions", fmt.Sprint(n))
}
