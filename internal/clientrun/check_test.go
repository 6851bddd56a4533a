package clientrun

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/subscribe"
)

// Check refuses what Consume or Produce could not do as asked, naming the fields
// in braces so that a command names its flags instead; what it takes
// goes through, and what only subscribe.Options.Validate knows comes as
// that error.
func TestCheckNamesTheFields(t *testing.T) {
	valid := func() ConsumeOptions {
		return ConsumeOptions{Conn: conn("pulsar://127.0.0.1:6650"), Subscribe: subscribe.Options{Topics: []string{"t"}, Subscription: "s"}}
	}
	for _, c := range []struct {
		set  func(*ConsumeOptions)
		want string
	}{
		{func(o *ConsumeOptions) { o.Client.OperationRetries.Attempts = -1 }, "{Client.OperationRetries.Attempts} must not be negative, got -1"},
		{func(o *ConsumeOptions) { o.ConnectTimeout = 0 }, "{ConnectTimeout} must be positive, got 0s"},
		{func(o *ConsumeOptions) { o.CloseTimeout = -time.Second }, "{CloseTimeout} must be positive, got -1s"},
		{func(o *ConsumeOptions) { o.Client.TLS.CertFile = "c.pem" }, "{Client.TLS.CertFile} and {Client.TLS.KeyFile} go together"},
		{func(o *ConsumeOptions) { o.Client.ServiceURL = "http://h:6650" }, `{Client.ServiceURL} "http://h:6650": `},
		{func(o *ConsumeOptions) { o.Client.TLS.CAFile = "/no/such/ca.pem" }, "{Client.TLS.CAFile}: open /no/such/ca.pem"},
		{func(o *ConsumeOptions) { o.Subscribe.Pattern = "persistent://public/default/t-.*" }, "{Subscribe.Topics} and {Subscribe.Pattern} exclude each other"},
		{func(o *ConsumeOptions) { o.Subscribe.Subscription = "" }, "{Subscribe.Subscription} is required"},
		{func(o *ConsumeOptions) { o.Each.Count = -1 }, "{Each.Count} must not be negative, got -1"},
		{func(o *ConsumeOptions) { o.Each.Idle = -time.Second }, "{Each.Idle} must not be negative, got -1s"},
		{func(o *ConsumeOptions) { o.Subscribe.Topics = []string{"a/b/c/d/e"} }, "{Subscribe.Topics}: "},
		{func(o *ConsumeOptions) {
			o.Subscribe.Topics = []string{"a", "b"}
			o.Subscribe.Rewind, _ = subscribe.ParsePosition("1:2:-1")
		}, "{Subscribe.Rewind} with a message id needs exactly one {Subscribe.Topics}"},
	} {
		o := valid()
		c.set(&o)
		var oe *OptionError
		if err := o.Check(); !errors.As(err, &oe) || !strings.Contains(oe.Msg, c.want) {
			t.Errorf("Check = %v, want an OptionError with %q", err, c.want)
		}
	}
	if err := valid().Check(); err != nil {
		t.Errorf("Check of valid options: %v", err)
	}
	o := valid()
	o.Subscribe.Type = "round_robin" // only subscribe knows its types
	var oe *OptionError
	if err := o.Check(); err == nil || errors.As(err, &oe) || !strings.Contains(err.Error(), "round_robin") {
		t.Errorf("Check of an unknown type: %v, want subscribe.Options.Validate's error", err)
	}
	o = valid()
	o.Client = pool.Options{ServiceURL: "pulsar://h:6650", TLS: pool.TLSOptions{CertFile: "/no/c.pem", KeyFile: "/no/k.pem"}}
	if err := o.Check(); !errors.As(err, &oe) || oe.Text(func(f string) string { return "--" + f }) != "--Client.TLS.CertFile: open /no/c.pem: no such file or directory" {
		t.Errorf("Check of a missing certificate: %v", err)
	}
	for _, c := range []struct {
		set  func(*ProduceOptions)
		want string
	}{
		{func(o *ProduceOptions) { o.ConnectTimeout = 0 }, "{ConnectTimeout} must be positive"},
		{func(o *ProduceOptions) { o.Topic = "" }, "{Topic} is required"},
		{func(o *ProduceOptions) { o.Topic = "a/b/c/d/e" }, "{Topic}: "},
		{func(o *ProduceOptions) { o.Rate = -1 }, "{Rate} must not be negative, got -1"},
		{func(o *ProduceOptions) {
			o.Client.Producer.Batching = pool.BatchingOptions{Disabled: true, ByKey: true}
		},
			"{Client.Producer.Batching.ByKey} and {Client.Producer.Batching.Disabled} exclude each other"},
	} {
		o := ProduceOptions{Conn: conn("pulsar://127.0.0.1:6650"), Topic: "t"}
		if err := o.Check(); err != nil {
			t.Fatalf("Check of valid produce options: %v", err)
		}
		c.set(&o)
		if err := o.Check(); !errors.As(err, &oe) || !strings.Contains(oe.Msg, c.want) {
			t.Errorf("produce: Check = %v, want an OptionError with %q", err, c.want)
		}
	}
	if got := (&OptionError{Msg: "{Each.Idle} must not be negative"}).Error(); got != "clientrun: Each.Idle must not be negative" {
		t.Errorf("Error: %q", got)
	}
}
