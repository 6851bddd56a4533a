package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pool"
)

// streamrun state reads a pipeline's changelog, named by its file or
// given, as a host would: keys, get and dump show each key's last value,
// a deleted key is gone, get of a key without a value fails, and bad
// usage says what is wrong. Against either broker.
func TestStateLooksInsideAChangelog(t *testing.T) {
	url := brokertest.Target(t).URL
	now := time.Now().UnixNano()
	changelog := fmt.Sprintf("persistent://public/default/state-cli-%d", now)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := pool.New(ctx, pool.Options{ServiceURL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close(context.Background())
	for _, kv := range [][2]string{{"b", "1"}, {"a", "1"}, {"b", "2"}, {"gone", "x"}, {"gone", ""}} {
		if _, err := cl.Publish(ctx, changelog, pool.Message{Key: kv[0], Payload: []byte(kv[1])}); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(t.TempDir(), "p.yaml")
	yaml := fmt.Sprintf(`pipelines:
  - name: totals
    source: {topics: [in], subscription: s, type: exclusive}
    handler: {plugin: /bin/true}
    state: {enabled: true, changelog: %q}
`, changelog)
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	state := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(ctx, append([]string{"state", "--url", url}, args...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	if code, out, errs := state("keys", file); code != 0 || out != "a\nb\n" {
		t.Errorf("keys: exit %d, %q, %s", code, out, errs)
	}
	if code, out, errs := state("get", "b", "--changelog", changelog); code != 0 || out != "2" {
		t.Errorf("get b: exit %d, %q, %s", code, out, errs)
	}
	if code, out, errs := state("dump", file, "--pipeline", "totals"); code != 0 || out != `{"key":"a","value":"1"}`+"\n"+`{"key":"b","value":"2"}`+"\n" {
		t.Errorf("dump: exit %d, %q, %s", code, out, errs)
	}
	if code, _, errs := state("get", "gone", file); code != 1 || !strings.Contains(errs, `key "gone" has no value`) {
		t.Errorf("get of a deleted key: exit %d, %s", code, errs)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "say keys, get KEY or dump"},
		{[]string{"get"}, "get needs a KEY"},
		{[]string{"keys"}, "give a pipeline FILE or --changelog TOPIC"},
		{[]string{"keys", file, "--changelog", changelog}, "exclude each other"},
		{[]string{"keys", file, "--pipeline", "other"}, "has no pipeline other"},
		{[]string{"list", file}, `"list": say keys, get KEY or dump`},
	} {
		if code, _, errs := state(c.args...); code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("state %v: exit %d, %s; want 2 saying %q", c.args, code, errs, c.want)
		}
	}
}
