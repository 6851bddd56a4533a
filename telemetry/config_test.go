package telemetry_test

import (
	"context"
	"strings"
	"testing"

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
		tp, err := telemetry.NewTracerProvider(ctx, c)
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
