package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamrun/streamrun/admin"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/subscribe"
)

// adminTarget is a broker with its service and admin URLs.
type adminTarget struct {
	name, service, admin string
}

// adminTargets are the brokers the topics tests run against: the embedded
// broker always, Apache Pulsar too when STREAMRUN_PULSAR_URL and
// STREAMRUN_PULSAR_HTTP are set.
func adminTargets(t *testing.T) []adminTarget {
	c := brokertest.Start(t)
	out := []adminTarget{{"embedded", c.ServiceURL(), c.AdminURL()}}
	if u, h := os.Getenv("STREAMRUN_PULSAR_URL"), os.Getenv("STREAMRUN_PULSAR_HTTP"); u != "" && h != "" {
		out = append(out, adminTarget{"pulsar", u, h})
	} else {
		t.Log("Apache Pulsar part skipped: STREAMRUN_PULSAR_URL and STREAMRUN_PULSAR_HTTP are not set")
	}
	return out
}

// topicsJSON runs `streamrun topics ARGS -o json` and decodes its output.
// compactionCursor is the subscription a broker keeps for a compacted
// topic's horizon, on Apache Pulsar and on the embedded broker.
const compactionCursor = "__compaction"

func topicsJSON(t *testing.T, tg adminTarget, v any, args ...string) {
	t.Helper()
	code, out, errs := runArgs(append([]string{"topics", "--admin-url", tg.admin, "-o", "json"}, args...)...)
	if code != 0 {
		t.Fatalf("topics %v: exit %d: %s", args, code, errs)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("topics %v: %v in %s", args, err, out)
	}
}

func backlogOf(t *testing.T, tg adminTarget, topic, sub string) int64 {
	t.Helper()
	var rows []admin.SubscriptionBacklog
	topicsJSON(t, tg, &rows, "backlog", topic)
	for _, r := range rows {
		if r.Subscription == sub {
			return r.Backlog
		}
	}
	t.Fatalf("no subscription %s in %+v", sub, rows)
	return 0
}

// subscribeAndLeave creates a durable subscription at the earliest message.
func subscribeAndLeave(t *testing.T, url, topic, sub string) {
	t.Helper()
	ctx, c, closeAll := dialPool(t, url)
	defer closeAll()
	cons, err := subscribe.New(ctx, c, subscribe.Options{Topics: []string{topic}, Subscription: sub, Type: subscribe.Shared, InitialPosition: subscribe.Earliest})
	if err != nil {
		t.Fatal(err)
	}
	cons.Close(ctx)
}

// Every topics subcommand against both brokers: the same commands, the
// same results.
func TestTopicsCommand(t *testing.T) {
	for _, tg := range adminTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			base := fmt.Sprintf("persistent://public/default/topics-%d", time.Now().UnixNano())
			r := topicsRun{t: t, tg: tg, parted: base + "-p", plain: base + "-np"}
			r.createAndList()
			ids := r.fill()
			r.checkSubscriptionsAndBacklog()
			r.checkResetCursor(ids)
			r.checkStats()
			r.deleteBoth()
		})
	}
}

// topicsRun is TestTopicsCommand's run against one broker: a partitioned
// topic of 2 and a plain one, each with subscription "s".
type topicsRun struct {
	t             *testing.T
	tg            adminTarget
	parted, plain string
}

// cli runs `streamrun topics --admin-url ADMIN ARGS`.
func (r *topicsRun) cli(args ...string) (int, string, string) {
	return runArgs(append([]string{"topics", "--admin-url", r.tg.admin}, args...)...)
}

// createAndList creates both topics, refuses the plain one again (409),
// and lists them, the partitioned one without its partitions.
func (r *topicsRun) createAndList() {
	t, parted, plain := r.t, r.parted, r.plain
	if code, out, errs := r.cli("create", parted, "--partitions", "2"); code != 0 || out != "created "+parted+" with 2 partitions\n" {
		t.Fatalf("create --partitions 2: exit %d: %s%s", code, out, errs)
	}
	if code, out, errs := r.cli("create", plain); code != 0 || out != "created "+plain+"\n" {
		t.Fatalf("create: exit %d: %s%s", code, out, errs)
	}
	if code, _, errs := r.cli("create", plain); code != 1 || !strings.Contains(errs, "409") {
		t.Fatalf("create twice: exit %d: %s", code, errs)
	}
	var list []string
	topicsJSON(t, r.tg, &list, "list")
	if !slices.Contains(list, parted) || !slices.Contains(list, plain) || slices.Contains(list, parted+"-partition-0") {
		t.Fatalf("list: %v", list)
	}
}

// fill subscribes "s" to both topics and publishes 10 messages to the
// partitioned one and 5 to the plain one, returning the plain one's ids.
func (r *topicsRun) fill() []pulsarwire.MessageID {
	subscribeAndLeave(r.t, r.tg.service, r.parted, "s")
	subscribeAndLeave(r.t, r.tg.service, r.plain, "s")
	publishFor(r.t, r.tg.service, r.parted, 10)
	return publishIDs(r.t, r.tg.service, r.plain, 5)
}

func (r *topicsRun) checkSubscriptionsAndBacklog() {
	var subs []string
	topicsJSON(r.t, r.tg, &subs, "subscriptions", r.parted)
	// Apache Pulsar as CI starts it may have compacted the topic already.
	subs = slices.DeleteFunc(subs, func(s string) bool { return s == compactionCursor })
	if !slices.Equal(subs, []string{"s"}) {
		r.t.Fatalf("subscriptions: %v", subs)
	}
	// Sent one at a time: one entry per message.
	if b := backlogOf(r.t, r.tg, r.parted, "s"); b != 10 {
		r.t.Fatalf("backlog of the partitioned topic: %d", b)
	}
}

// checkResetCursor moves "s" on the plain topic to the latest, the
// earliest, its third message and an hour ago, checking the backlog each
// leaves.
func (r *topicsRun) checkResetCursor(ids []pulsarwire.MessageID) {
	t, plain := r.t, r.plain
	for _, tc := range []struct {
		to   string
		want int64
	}{{"latest", 0}, {"earliest", 5}, {ids[2].String(), 3}, {"1h", 5}} {
		if code, out, errs := r.cli("reset-cursor", plain, "-s", "s", "--to", tc.to); code != 0 || !strings.HasPrefix(out, "reset s on "+plain) {
			t.Fatalf("reset-cursor --to %s: exit %d: %s%s", tc.to, code, out, errs)
		}
		if b := backlogOf(t, r.tg, plain, "s"); b != tc.want {
			t.Fatalf("backlog after reset-cursor --to %s: %d, want %d", tc.to, b, tc.want)
		}
	}
}

// checkStats checks stats of the partitioned topic and internal-stats of
// the plain one.
func (r *topicsRun) checkStats() {
	t := r.t
	code, out, errs := r.cli("stats", r.parted)
	if code != 0 || !strings.Contains(out, "in:  10 messages") || !strings.Contains(out, "s (Shared): backlog 10 entries") {
		t.Fatalf("stats: exit %d: %s%s", code, out, errs)
	}
	var internal struct {
		NumberOfEntries int64 `json:"numberOfEntries"`
		Cursors         map[string]struct {
			MarkDeletePosition string `json:"markDeletePosition"`
		} `json:"cursors"`
	}
	topicsJSON(t, r.tg, &internal, "internal-stats", r.plain)
	delete(internal.Cursors, compactionCursor)
	if internal.NumberOfEntries != 5 || len(internal.Cursors) != 1 {
		t.Fatalf("internal-stats: %+v", internal)
	}
}

// deleteBoth deletes both topics: the list no longer has them, and stats
// of the plain one is a 404.
func (r *topicsRun) deleteBoth() {
	t, parted, plain := r.t, r.parted, r.plain
	for _, tp := range []string{parted, plain} {
		if code, out, errs := r.cli("delete", tp); code != 0 || out != "deleted "+tp+"\n" {
			t.Fatalf("delete %s: exit %d: %s%s", tp, code, out, errs)
		}
	}
	var list []string
	topicsJSON(t, r.tg, &list, "list")
	if slices.Contains(list, parted) || slices.Contains(list, plain) {
		t.Fatalf("list after delete: %v", list)
	}
	if code, _, errs := r.cli("stats", plain); code != 1 || !strings.Contains(errs, "404") {
		t.Fatalf("stats of a deleted topic: exit %d: %s", code, errs)
	}
}

func TestTopicsRefusesBadUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "give a subcommand"},
		{[]string{"frob"}, `unknown subcommand "frob"`},
		{[]string{"create"}, "create takes one TOPIC"},
		{[]string{"create", "persistent://bad tenant/default/x"}, `tenant "bad tenant" has ' '`},
		{[]string{"create", "x", "--partitions", "-1"}, "--partitions must not be negative"},
		{[]string{"list", "--partitions", "3"}, "--partitions belongs to topics create"},
		{[]string{"list", "nonamespace"}, "want TENANT/NAMESPACE"},
		{[]string{"reset-cursor", "x", "--to", "earliest"}, "needs --subscription"},
		{[]string{"reset-cursor", "x", "-s", "s", "--to", "soon"}, `--to "soon"`},
		{[]string{"stats", "x", "--admin-url", "pulsar://127.0.0.1:6650"}, "this is a service URL"},
		{[]string{"stats", "x", "--admin-url", "127.0.0.1:8080"}, "want http://host:port"},
		{[]string{"stats", "x", "-o", "yaml"}, `--output "yaml"`},
	} {
		code, _, errs := runArgs(append([]string{"topics"}, tc.args...)...)
		if code != 2 || !strings.Contains(errs, tc.want) || !strings.HasSuffix(errs, "Run 'streamrun topics --help' for usage.\n") {
			t.Errorf("topics %v: exit %d, stderr %q; want 2 and %q", tc.args, code, errs, tc.want)
		}
	}
}

// publishIDs publishes n messages one at a time and returns their ids.
func publishIDs(t *testing.T, url, topic string, n int) []pulsarwire.MessageID {
	t.Helper()
	ctx, c, closeAll := dialPool(t, url)
	defer closeAll()
	var ids []pulsarwire.MessageID
	for i := 0; i < n; i++ {
		id, err := c.Publish(ctx, topic, pool.Message{Payload: []byte(fmt.Sprint("m", i))})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// A topic name is refused by `streamrun topics create` (exit 2, with the
// rule it breaks) exactly when the broker's admin API refuses it: tenant
// and namespace characters are Pulsar's rule; Apache Pulsar 4.0.8 takes
// spaces, "!", "%" and ":" in the local name, so streamrun does too.
func TestTopicNamesAsTheBrokerJudgesThem(t *testing.T) {
	for _, tg := range adminTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			n := time.Now().UnixNano()
			for _, name := range []string{
				fmt.Sprintf("persistent://public/default/bad topic! %d", n),
				fmt.Sprintf("persistent://public/default/a%%b:%d", n),
				fmt.Sprintf("persistent://public/default/été-%d", n),
				fmt.Sprintf("persistent://bad tenant/default/x-%d", n),
				fmt.Sprintf("persistent://public/bad ns!/x-%d", n),
			} {
				tp, parseErr := pulsarwire.ParseTopic(name)
				var accepted bool
				if parseErr != nil {
					// Ask the broker with the name as it is, escaped.
					rest := strings.TrimPrefix(name, "persistent://")
					parts := strings.SplitN(rest, "/", 3)
					tp = pulsarwire.Topic{Persistent: true, Tenant: parts[0], Namespace: parts[1], Local: parts[2]}
				}
				a := testAdmin(t, tg.admin)
				_, err := a.Do(context.Background(), "PUT", admin.TopicPath(tp), nil)
				accepted = err == nil
				code, _, errs := runArgs("topics", "--admin-url", tg.admin, "create", name+"-cli")
				switch {
				case accepted && code != 0:
					t.Errorf("%q: the broker takes it, streamrun exits %d: %s", name, code, errs)
				case !accepted && (code != 2 || !strings.Contains(errs, "allowed: letters, digits")):
					t.Errorf("%q: the broker refuses it (%v), streamrun exits %d: %s", name, err, code, errs)
				}
			}
		})
	}
}
