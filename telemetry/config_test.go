package telemetry_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/streamrun/streamrun/telemetry"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// The OTEL_* variables win over the file's settings, and a child given
// Environ reads back the same configuration.
func TestFromEnvOverFile(t *testing.T) {
	file := telemetry.Config{Endpoint: "http://file:4317", ServiceName: "from-file", Sampler: "always_on",
		Headers: map[string]string{"a": "1"}, ResourceAttributes: map[string]string{"env": "dev"}}
	c, err := telemetry.FromEnv(file, env(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT":       "http://env:4318",
		"OTEL_EXPORTER_OTLP_PROTOCOL":       "http/protobuf",
		"OTEL_EXPORTER_OTLP_HEADERS":        "b=two%20words, c = 3",
		"OTEL_RESOURCE_ATTRIBUTES":          "env=prod,region=eu",
		"OTEL_TRACES_SAMPLER":               "parentbased_traceidratio",
		"OTEL_TRACES_SAMPLER_ARG":           "0.25",
		"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "a=override",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Endpoint != "http://env:4318" || c.Protocol != telemetry.ProtocolHTTP || c.ServiceName != "from-file" ||
		c.Sampler != "parentbased_traceidratio" || c.SamplerArg != "0.25" ||
		c.Headers["a"] != "override" || c.Headers["b"] != "two words" || c.Headers["c"] != "3" ||
		c.ResourceAttributes["env"] != "prod" || c.ResourceAttributes["region"] != "eu" || !c.Enabled() {
		t.Fatalf("%+v", c)
	}
	if file.Headers["b"] != "" {
		t.Errorf("FromEnv changed the file's map: %v", file.Headers)
	}
	kv := map[string]string{}
	for _, e := range c.Environ() {
		k, v, _ := strings.Cut(e, "=")
		kv[k] = v
	}
	back, err := telemetry.FromEnv(telemetry.Config{}, env(kv))
	if err != nil {
		t.Fatal(err)
	}
	if back.Endpoint != c.Endpoint || back.Protocol != c.Protocol || back.Headers["b"] != "two words" ||
		back.ResourceAttributes["region"] != "eu" || back.SamplerArg != "0.25" || back.ServiceName != "from-file" {
		t.Errorf("through Environ: %+v", back)
	}
}

// Off unless an endpoint is configured, and off when the SDK is
// disabled; an off configuration makes no provider and tells children to
// export nothing.
func TestTracesOffUnlessConfigured(t *testing.T) {
	ctx := context.Background()
	for _, vars := range []map[string]string{
		{},
		{"OTEL_SERVICE_NAME": "x"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4317", "OTEL_SDK_DISABLED": "true"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4317", "OTEL_TRACES_EXPORTER": "none"},
	} {
		c, err := telemetry.FromEnv(telemetry.Config{}, env(vars))
		if err != nil {
			t.Fatal(err)
		}
		tp, err := telemetry.NewTracing(ctx, c, telemetry.TracingOptions{})
		if err != nil || tp != nil || c.Enabled() {
			t.Errorf("%v: provider %v, err %v", vars, tp, err)
		}
		if e := c.Environ(); len(e) != 1 || e[0] != "OTEL_TRACES_EXPORTER=none" {
			t.Errorf("%v: Environ %v", vars, e)
		}
	}
}

// A bad setting is refused, naming it.
func TestBadSettings(t *testing.T) {
	for _, tc := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, `protocol "http/json"`},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4317"}, `endpoint "collector:4317"`},
		{map[string]string{"OTEL_TRACES_SAMPLER": "sometimes"}, `sampler "sometimes"`},
		{map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, `sampler argument "2"`},
		{map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "novalue"}, `OTEL_EXPORTER_OTLP_HEADERS: "novalue" is not key=value`},
		{map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "a=%zz"}, `OTEL_RESOURCE_ATTRIBUTES: value of a`},
	} {
		_, err := telemetry.FromEnv(telemetry.Config{}, env(tc.vars))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error with %q", tc.vars, err, tc.want)
		}
	}
}

// The standard timeouts: the signal's own variable wins over the general
// one, OTEL_BSP_EXPORT_TIMEOUT caps the flush at exit, a child reads them
// back from Environ, and a bad value is refused naming the variable.
func TestTimeoutsFromEnv(t *testing.T) {
	for _, tc := range []struct {
		vars           map[string]string
		timeout, flush time.Duration
	}{
		{map[string]string{}, 0, telemetry.DefaultFlushTimeout},
		{map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "5000"}, 5 * time.Second, 5 * time.Second},
		{map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "5000", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "300"},
			300 * time.Millisecond, 300 * time.Millisecond},
		{map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "5000", "OTEL_BSP_EXPORT_TIMEOUT": "1000"}, 5 * time.Second, time.Second},
		{map[string]string{"OTEL_BSP_EXPORT_TIMEOUT": "30000"}, 0, telemetry.DefaultFlushTimeout},
	} {
		tc.vars["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://h:4317"
		c, err := telemetry.FromEnv(telemetry.Config{}, env(tc.vars))
		if err != nil {
			t.Fatal(err)
		}
		if c.Timeout != tc.timeout || c.FlushTimeout() != tc.flush {
			t.Errorf("%v: timeout %s, flush %s; want %s, %s", tc.vars, c.Timeout, c.FlushTimeout(), tc.timeout, tc.flush)
		}
		kv := map[string]string{}
		for _, e := range c.Environ() {
			k, v, _ := strings.Cut(e, "=")
			kv[k] = v
		}
		back, err := telemetry.FromEnv(telemetry.Config{}, env(kv))
		if err != nil || back.Timeout != c.Timeout || back.FlushTimeout() != c.FlushTimeout() {
			t.Errorf("%v through Environ: %+v, %v", tc.vars, back, err)
		}
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_BSP_EXPORT_TIMEOUT"} {
		for _, v := range []string{"2s", "-1", "0"} {
			_, err := telemetry.FromEnv(telemetry.Config{}, env(map[string]string{k: v}))
			if err == nil || !strings.Contains(err.Error(), k+`: "`+v+`": want a number of milliseconds`) {
				t.Errorf("%s=%s: %v", k, v, err)
			}
		}
	}
}
