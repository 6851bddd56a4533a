package benchrun

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamrun/streamrun/admin"
	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/subscribe"
)

// valid is a run every kind takes.
func valid() Options {
	return Options{
		CloseTimeout: time.Second, DrainTimeout: time.Second, Subscription: "bench", Produce: true,
		Handler: HandlerOptions{BatchSize: 1, Instances: 1},
	}
}

// Check refuses what a run cannot go with, naming the fields in braces so
// that a command names its flags instead; what it takes, Start runs with.
func TestCheckNamesTheFields(t *testing.T) {
	for _, c := range []struct {
		kind Kind
		set  func(*Options)
		want string
	}{
		{KindProduce, func(o *Options) { o.Size = -1 }, "{Size} must not be negative"},
		{KindProduce, func(o *Options) { o.Count, o.Duration = 10, time.Second }, "{Count} and {Duration} exclude each other"},
		{KindProduce, func(o *Options) { o.Partitions = MaxPartitions + 1 }, "{Partitions} must be from 1 to 10000"},
		{KindProduce, func(o *Options) { o.Memory, o.Sync = true, true }, "{Memory} and {Sync} exclude each other"},
		{KindProduce, func(o *Options) { o.ServiceURL, o.Memory = "pulsar://h:6650", true }, "not {ServiceURL}"},
		{KindProduce, func(o *Options) { o.Topic = "a/b/c/d/e" }, "{Topic}: "},
		{KindProduce, func(o *Options) { o.CloseTimeout = 0 }, "{CloseTimeout} must be positive"},
		{KindConsume, func(o *Options) { o.Type = subscribe.KeyShared }, "{Type} key_shared needs {Keys}"},
		{KindConsume, func(o *Options) { o.Pattern, o.Topics = true, 1 }, "{Pattern} needs {Topics} 2 or more"},
		{KindConsume, func(o *Options) { o.Produce = false }, "{Produce} false needs {Count} or {Duration}"},
		{KindConsume, func(o *Options) { o.Subscription = "" }, "{Subscription} must not be empty"},
		{KindPipeline, func(o *Options) { o.Handler.InProcess, o.Handler.Steps = true, true }, "exclude each other"},
		{KindPipeline, func(o *Options) { o.Handler.Config = map[string]any{} }, "{Handler.Config} is for a handler of your own"},
		{KindPipeline, func(o *Options) { o.Handler.Plugin = "/no/such/plugin" }, "{Handler.Plugin}: "},
		{KindPipeline, func(o *Options) { o.Handler.Instances = 0 }, "{Handler.Instances} must be at least 1"},
	} {
		o := valid()
		c.set(&o)
		var oe *OptionError
		if err := o.Check(c.kind); !errors.As(err, &oe) || !strings.Contains(oe.Msg, c.want) {
			t.Errorf("%s: Check = %v, want an OptionError with %q", c.kind, err, c.want)
		}
	}
	for _, k := range []Kind{KindProduce, KindConsume, KindPipeline} {
		if err := valid().Check(k); err != nil {
			t.Errorf("%s: Check of valid options: %v", k, err)
		}
	}
	o := valid()
	o.Type = subscribe.KeyShared // a consumer's rule, not a producer's
	if err := o.Check(KindProduce); err != nil {
		t.Errorf("produce refused a consumer's option: %v", err)
	}
	oe := &OptionError{Msg: "{Memory} and {Sync} exclude each other"}
	if got := oe.Text(func(f string) string { return "--" + strings.ToLower(f) }); got != "--memory and --sync exclude each other" {
		t.Errorf("Text: %q", got)
	}
	if got := oe.Error(); got != "benchrun: Memory and Sync exclude each other" {
		t.Errorf("Error: %q", got)
	}
}

// Run against a broker given by URL deletes the topics it named itself at
// the end, and says which; with KeepTopics they stay. Neither Count nor
// Duration: it runs for DefaultDuration, capped here by CountCap.
func TestRunDeletesItsOwnTopics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := broker.Start(ctx, broker.Options{Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, err := admin.New(admin.Options{URL: c.AdminURL()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for _, keep := range []bool{false, true} {
		res, err := Run(ctx, KindProduce, Options{
			ServiceURL:     c.ServiceURL(),
			Client:         func(url string) (pool.Options, error) { return pool.Options{ServiceURL: url}, nil },
			Admin:          admin.Options{URL: c.AdminURL()},
			ConnectTimeout: 30 * time.Second, CloseTimeout: 30 * time.Second,
			Size: 100, CountCap: 50, KeepTopics: keep,
		})
		if err != nil {
			t.Fatal(err)
		}
		topics, err := a.Topics(ctx, "public/default")
		if err != nil {
			t.Fatal(err)
		}
		there := slices.Contains(topics, res.Conditions.Topic)
		switch {
		case res.Sent != 50 || res.Conditions.DurationSeconds != DefaultDuration.Seconds():
			t.Errorf("keep %v: sent %d in a run of %vs, want 50 and the default duration", keep, res.Sent, res.Conditions.DurationSeconds)
		case !keep && (there || !slices.Equal(res.TopicsDeleted, []string{res.Conditions.Topic})):
			t.Errorf("deleted %v, %s still there: %v", res.TopicsDeleted, res.Conditions.Topic, there)
		case keep && (!there || len(res.TopicsDeleted) != 0):
			t.Errorf("KeepTopics: deleted %v, %s there: %v", res.TopicsDeleted, res.Conditions.Topic, there)
		}
	}
	if _, err := Run(ctx, "frobnicate", Options{}); err == nil {
		t.Error("Run of an unknown kind")
	}
}
