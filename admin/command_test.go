package admin_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/streamrun/streamrun/admin"
	"github.com/streamrun/streamrun/broker/brokertest"
)

// A topics subcommand that would not do what it says is refused before
// anything is sent, saying what is wrong.
func TestTopicCommandCheck(t *testing.T) {
	for _, tc := range []struct {
		c    admin.TopicCommand
		want string // "" for a command that passes
	}{
		{admin.TopicCommand{}, "give a subcommand: list, create"},
		{admin.TopicCommand{Name: "purge", Args: []string{"t"}}, `unknown subcommand "purge"`},
		{admin.TopicCommand{Name: "list"}, ""},
		{admin.TopicCommand{Name: "list", Args: []string{"acme/prod"}}, ""},
		{admin.TopicCommand{Name: "list", Args: []string{"a/b", "c/d"}}, "list takes one namespace, got a/b c/d"},
		{admin.TopicCommand{Name: "list", Args: []string{"acme"}}, `list "acme": want TENANT/NAMESPACE`},
		{admin.TopicCommand{Name: "stats"}, "stats takes one TOPIC, got 0 arguments"},
		{admin.TopicCommand{Name: "delete", Args: []string{"a", "b"}}, "delete takes one TOPIC, got 2 arguments"},
		{admin.TopicCommand{Name: "backlog", Args: []string{"persistent://a"}}, "persistent://a"},
		{admin.TopicCommand{Name: "create", Args: []string{"t"}, Partitions: 3}, ""},
		{admin.TopicCommand{Name: "create", Args: []string{"t"}, Partitions: -1}, "--partitions must not be negative, got -1"},
		{admin.TopicCommand{Name: "reset-cursor", Args: []string{"t"}, To: "latest"}, "reset-cursor needs --subscription"},
		{admin.TopicCommand{Name: "reset-cursor", Args: []string{"t"}, Subscription: "s"}, "reset-cursor needs --to"},
		{admin.TopicCommand{Name: "reset-cursor", Args: []string{"t"}, Subscription: "s", To: "yesterday"}, `--to "yesterday": want earliest`},
		{admin.TopicCommand{Name: "reset-cursor", Args: []string{"t"}, Subscription: "s", To: "10m"}, ""},
	} {
		err := tc.c.Check()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v, want it taken", tc.c, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: %v, want an error with %q", tc.c, err, tc.want)
		}
	}
}

// Each subcommand run through RunTopicCommand, the same against the
// embedded broker and Apache Pulsar: its text form for people and its
// JSON form, and a bad command refused by the same rules as Check.
func TestRunTopicCommand(t *testing.T) {
	peer := brokertest.Target(t)
	ctx := brokertest.Context(t, time.Minute)
	a, err := admin.New(admin.Options{URL: peer.Admin})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	name := fmt.Sprintf("admin-command-%d", time.Now().UnixNano())
	full := "persistent://public/default/" + name
	run := func(c admin.TopicCommand) (text, js string) {
		t.Helper()
		r, err := a.RunTopicCommand(ctx, c)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		var tb, jb bytes.Buffer
		if err := r.WriteText(&tb); err != nil {
			t.Fatal(err)
		}
		if err := r.WriteJSON(&jb); err != nil {
			t.Fatal(err)
		}
		if !json.Valid(jb.Bytes()) {
			t.Fatalf("%s: JSON form %q does not parse", c.Name, jb.String())
		}
		return tb.String(), jb.String()
	}
	if _, err := a.RunTopicCommand(ctx, admin.TopicCommand{Name: "create", Args: []string{name}, Partitions: -1}); err == nil {
		t.Fatal("create with -1 partitions was run")
	}
	text, js := run(admin.TopicCommand{Name: "create", Args: []string{name}, Partitions: 2})
	if text != "created "+full+" with 2 partitions\n" || !strings.Contains(js, `"partitions": 2`) {
		t.Errorf("create: %q %q", text, js)
	}
	text, js = run(admin.TopicCommand{Name: "list"})
	var list []string
	if err := json.Unmarshal([]byte(js), &list); err != nil || !strings.Contains(text, full+"\n") || len(strings.Split(strings.TrimSpace(text), "\n")) != len(list) {
		t.Errorf("list: text %q, JSON %q (%v): want a line an item, %s among them", text, js, err, full)
	}
	text, js = run(admin.TopicCommand{Name: "stats", Args: []string{name}})
	if !strings.HasPrefix(text, full+"\n  in:  0 messages") || !strings.Contains(js, `"msgInCounter"`) {
		t.Errorf("stats: %q %q", text, js)
	}
	text, _ = run(admin.TopicCommand{Name: "backlog", Args: []string{name}})
	if !strings.HasPrefix(text, "SUBSCRIPTION") {
		t.Errorf("backlog: %q, want the table's header", text)
	}
	if _, err := a.RunTopicCommand(ctx, admin.TopicCommand{Name: "reset-cursor", Args: []string{name}, Subscription: "nobody", To: "latest"}); err == nil || !strings.Contains(err.Error(), "reset nobody on "+full) {
		t.Errorf("reset of a subscription that is not there: %v, want an error naming it and the topic", err)
	}
	text, js = run(admin.TopicCommand{Name: "delete", Args: []string{name}})
	if text != "deleted "+full+"\n" || !strings.Contains(js, `"deleted": "`+full+`"`) {
		t.Errorf("delete: %q %q", text, js)
	}
}
