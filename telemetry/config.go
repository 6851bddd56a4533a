package telemetry

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Config is how traces are exported. The zero value exports nothing.
type Config struct {
	// Endpoint is the OTLP base URL (OTEL_EXPORTER_OTLP_ENDPOINT), such
	// as "http://collector:4317" for gRPC or "http://collector:4318" for
	// HTTP, to which "/v1/traces" is added for HTTP. Default "": traces
	// are off.
	Endpoint string
	// TracesEndpoint is the full URL for traces
	// (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); it wins over Endpoint and is
	// used as it is. Default "".
	TracesEndpoint string
	// Protocol is "grpc" or "http/protobuf"
	// (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else
	// OTEL_EXPORTER_OTLP_PROTOCOL). Default "grpc".
	Protocol string
	// Headers are sent with every export (OTEL_EXPORTER_OTLP_HEADERS and
	// OTEL_EXPORTER_OTLP_TRACES_HEADERS, "k=v,k2=v2", values
	// URL-encoded). Default none.
	Headers map[string]string
	// ServiceName is the resource's service.name (OTEL_SERVICE_NAME).
	// Default "streamrun".
	ServiceName string
	// ResourceAttributes are added to the resource
	// (OTEL_RESOURCE_ATTRIBUTES, "k=v,k2=v2"). Default none.
	ResourceAttributes map[string]string
	// Sampler is one of always_on, always_off, traceidratio,
	// parentbased_always_on, parentbased_always_off,
	// parentbased_traceidratio (OTEL_TRACES_SAMPLER). Default
	// parentbased_always_on.
	Sampler string
	// SamplerArg is the sampler's argument (OTEL_TRACES_SAMPLER_ARG): the
	// ratio for the traceidratio samplers. Default 1.
	SamplerArg string
	// Timeout bounds one export to the collector, every try of it
	// (OTEL_EXPORTER_OTLP_TRACES_TIMEOUT, else OTEL_EXPORTER_OTLP_TIMEOUT:
	// milliseconds), and with it the flush at exit (FlushTimeout).
	// Default 0: 10 s per export, the OTLP exporters' default, and
	// DefaultFlushTimeout at exit.
	Timeout time.Duration
	// ProcessorTimeout bounds one export of the batch span processor
	// (OTEL_BSP_EXPORT_TIMEOUT: milliseconds), and so caps Timeout.
	// Default 0: 30 s, the SDK's default.
	ProcessorTimeout time.Duration
	// Disabled turns traces off whatever else is set (OTEL_SDK_DISABLED
	// =true, or OTEL_TRACES_EXPORTER=none).
	Disabled bool
}

// DefaultFlushTimeout is how long a program waits at exit for its last
// spans to be exported when no timeout is configured: long enough for a
// collector that answers, short enough that one that does not costs a
// command little. The OTLP exporters' own default, 10 s, still bounds
// each export while the program runs.
const DefaultFlushTimeout = 2 * time.Second

// FlushTimeout is how long the flush at exit may take: Timeout when it
// is set, else DefaultFlushTimeout, and never more than ProcessorTimeout
// when that is set. At that bound the exports in flight are cut, and the
// spans they held are reported lost.
func (c Config) FlushTimeout() time.Duration {
	d := DefaultFlushTimeout
	if c.Timeout > 0 {
		d = c.Timeout
	}
	if c.ProcessorTimeout > 0 && c.ProcessorTimeout < d {
		d = c.ProcessorTimeout
	}
	return d
}

// Protocols.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// Enabled reports whether c exports traces.
func (c Config) Enabled() bool {
	return !c.Disabled && (c.Endpoint != "" || c.TracesEndpoint != "")
}

// FromEnv returns base with what the OTEL_* variables set, read with
// getenv (os.Getenv in a program), in its place: the environment wins
// over a pipeline file, so an operator can change a deployment's export
// without editing its file.
func FromEnv(base Config, getenv func(string) string) (Config, error) {
	c := base
	set := func(dst *string, keys ...string) {
		for _, k := range keys {
			if v := strings.TrimSpace(getenv(k)); v != "" {
				*dst = v
				return
			}
		}
	}
	set(&c.Endpoint, "OTEL_EXPORTER_OTLP_ENDPOINT")
	set(&c.TracesEndpoint, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	set(&c.Protocol, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
	set(&c.ServiceName, "OTEL_SERVICE_NAME")
	set(&c.Sampler, "OTEL_TRACES_SAMPLER")
	set(&c.SamplerArg, "OTEL_TRACES_SAMPLER_ARG")
	for _, k := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		h, err := parsePairs(getenv(k))
		if err != nil {
			return Config{}, fmt.Errorf("%s: %w", k, err)
		}
		c.Headers = merged(c.Headers, h)
	}
	for _, v := range []struct {
		dst  *time.Duration
		keys []string
	}{
		{&c.Timeout, []string{"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"}},
		{&c.ProcessorTimeout, []string{"OTEL_BSP_EXPORT_TIMEOUT"}},
	} {
		for _, k := range v.keys {
			d, err := parseMillis(getenv(k))
			if err != nil {
				return Config{}, fmt.Errorf("%s: %w", k, err)
			}
			if d > 0 {
				*v.dst = d
				break
			}
		}
	}
	ra, err := parsePairs(getenv("OTEL_RESOURCE_ATTRIBUTES"))
	if err != nil {
		return Config{}, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	c.ResourceAttributes = merged(c.ResourceAttributes, ra)
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") ||
		strings.EqualFold(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")), "none") {
		c.Disabled = true
	}
	return c, c.Check()
}

func merged(a, b map[string]string) map[string]string {
	if len(b) == 0 {
		return a
	}
	out := maps.Clone(a)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, b)
	return out
}

// parseMillis reads a timeout as the OTEL_* variables write it: a whole
// number of milliseconds; "" is 0 (not set).
func parseMillis(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > int64(time.Hour/time.Millisecond) {
		return 0, fmt.Errorf("%q: want a number of milliseconds from 1 to 3600000", s)
	}
	return time.Duration(n) * time.Millisecond, nil
}

// parsePairs reads "k=v,k2=v2" with URL-encoded values, as the OTEL_*
// variables write them.
func parsePairs(s string) (map[string]string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	out := map[string]string{}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not key=value", item)
		}
		dv, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("value of %s: %w", k, err)
		}
		out[k] = dv
	}
	return out, nil
}

// Check reports what is wrong with c, naming the setting.
func (c Config) Check() error {
	switch c.Protocol {
	case "", ProtocolGRPC, ProtocolHTTP:
	default:
		return fmt.Errorf("telemetry: protocol %q: want %q or %q", c.Protocol, ProtocolGRPC, ProtocolHTTP)
	}
	for name, u := range map[string]string{"endpoint": c.Endpoint, "traces endpoint": c.TracesEndpoint} {
		if u == "" {
			continue
		}
		pu, err := url.Parse(u)
		if err != nil || pu.Host == "" || (pu.Scheme != "http" && pu.Scheme != "https") {
			return fmt.Errorf("telemetry: %s %q: want a URL such as http://collector:4317", name, u)
		}
	}
	if _, _, err := c.sampler(); err != nil {
		return err
	}
	return nil
}

// sampler returns the sampler's name and ratio, checked.
func (c Config) sampler() (string, float64, error) {
	name := c.Sampler
	if name == "" {
		name = "parentbased_always_on"
	}
	switch name {
	case "always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio":
	default:
		return "", 0, fmt.Errorf("telemetry: sampler %q: want one of always_on, always_off, traceidratio, "+
			"parentbased_always_on, parentbased_always_off, parentbased_traceidratio", name)
	}
	ratio := 1.0
	if c.SamplerArg != "" && strings.HasSuffix(name, "traceidratio") {
		r, err := strconv.ParseFloat(c.SamplerArg, 64)
		if err != nil || r < 0 || r > 1 {
			return "", 0, fmt.Errorf("telemetry: sampler argument %q: want a ratio from 0 to 1", c.SamplerArg)
		}
		ratio = r
	}
	return name, ratio, nil
}

// Environ returns c as OTEL_* variables ("KEY=value"), for a child
// process (a plugin) to export as the host does.
func (c Config) Environ() []string {
	if !c.Enabled() {
		return []string{"OTEL_TRACES_EXPORTER=none"}
	}
	var env []string
	add := func(k, v string) {
		if v != "" {
			env = append(env, k+"="+v)
		}
	}
	add("OTEL_EXPORTER_OTLP_ENDPOINT", c.Endpoint)
	add("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", c.TracesEndpoint)
	add("OTEL_EXPORTER_OTLP_PROTOCOL", c.Protocol)
	add("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", c.Protocol)
	add("OTEL_EXPORTER_OTLP_HEADERS", pairs(c.Headers))
	add("OTEL_EXPORTER_OTLP_TRACES_HEADERS", pairs(c.Headers))
	add("OTEL_SERVICE_NAME", c.ServiceName)
	add("OTEL_RESOURCE_ATTRIBUTES", pairs(c.ResourceAttributes))
	add("OTEL_TRACES_SAMPLER", c.Sampler)
	add("OTEL_TRACES_SAMPLER_ARG", c.SamplerArg)
	if c.Timeout > 0 {
		add("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", millis(c.Timeout))
	}
	if c.ProcessorTimeout > 0 {
		add("OTEL_BSP_EXPORT_TIMEOUT", millis(c.ProcessorTimeout))
	}
	return env
}

// millis is d as the OTEL_* variables write it, at least 1.
func millis(d time.Duration) string { return strconv.FormatInt(max(1, d.Milliseconds()), 10) }

func pairs(m map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k + "=" + url.PathEscape(m[k]))
	}
	return b.String()
}
