package broker_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamrun/streamrun/broker"
)

// Start refuses options that would not do what they say, before anything
// listens, with an *OptionError naming the fields so that a command can
// name its flags.
func TestStartRefusesOptionsThatSayNothing(t *testing.T) {
	cert := filepath.Join(t.TempDir(), "c.pem") // read, never parsed: a pair is checked first
	if err := os.WriteFile(cert, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		set  func(*broker.Options)
		want string
	}{
		{func(o *broker.Options) { o.Memory = false }, "no {DataDir} and not {Memory}"},
		{func(o *broker.Options) { o.TLSCertFile = cert }, "{TLSCertFile} and {TLSKeyFile} go together"},
		{func(o *broker.Options) { o.TLSCertFile, o.TLSKeyFile = "/no/such/c.pem", cert }, "{TLSCertFile}: open /no/such/c.pem"},
		{func(o *broker.Options) { o.Listen = "127.0.0.1" }, `{Listen} "127.0.0.1": want host:port`},
		{func(o *broker.Options) { o.HTTP = "127.0.0.1:65536" }, `{HTTP} "127.0.0.1:65536": port "65536" is not a number from 0 to 65535`},
		{func(o *broker.Options) { o.Pprof = "localhost" }, `{Pprof} "localhost": want host:port`},
		{func(o *broker.Options) { o.AdvertisedHost = "h:6650" }, `{AdvertisedHost} "h:6650": want a host name or IP address, without a port`},
		{func(o *broker.Options) { o.Listen = "-" }, "{Listen} - turns the plain port off"},
		{func(o *broker.Options) { o.HTTPS = "127.0.0.1:0" }, "{HTTPS} needs {TLSCertFile}"},
		{func(o *broker.Options) { o.TokenSecretKey, o.TokenPublicKey = []byte("k"), []byte("p") }, "exclude each other"},
		{func(o *broker.Options) { o.TokenPublicKey = []byte("not a key") }, "{TokenPublicKey}: "},
		{func(o *broker.Options) { o.Authorization = true }, "{Authorization} needs {TokenSecretKey} or {TokenPublicKey}"},
		{func(o *broker.Options) { o.TokenSecretKey, o.SuperUserRoles = []byte("k"), []string{"admin"} }, "{SuperUserRoles} needs {Authorization}"},
		{func(o *broker.Options) { o.MaxConnectionsPerIP = -1 }, "{MaxConnectionsPerIP} must not be negative"},
	} {
		o := broker.Options{Memory: true, Listen: "127.0.0.1:0", HTTP: "-"}
		c.set(&o)
		cl, err := broker.Start(context.Background(), o)
		if cl != nil {
			cl.Close()
		}
		var oe *broker.OptionError
		if !errors.As(err, &oe) || !strings.Contains(oe.Msg, c.want) {
			t.Errorf("Start: %v, want an OptionError with %q", err, c.want)
		}
	}
	oe := &broker.OptionError{Msg: "{HTTPS} needs {TLSCertFile}"}
	if got := oe.Text(func(f string) string { return "--" + strings.ToLower(f) }); got != "--https needs --tlscertfile" {
		t.Errorf("Text: %q", got)
	}
	if err := (broker.Options{Memory: true, Authorization: true, TokenSecretKey: []byte("k"), SuperUserRoles: []string{"a"}}).Check(); err != nil {
		t.Errorf("Check of options that go together: %v", err)
	}
}
