package pipelines

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// FieldError is one problem with one field. Path names the field the way
// the file spells it ("pipelines[0].source.topics[1]"), so that a loader
// can point at its line.
type FieldError struct {
	Path string
	Err  error
}

func (e *FieldError) Error() string { return e.Path + ": " + e.Err.Error() }

func (e *FieldError) Unwrap() error { return e.Err }

// Validate checks every pipeline of the file and that their names are
// distinct. The error joins a *FieldError for each problem found.
func (f *File) Validate() error {
	var errs []error
	if len(f.Pipelines) == 0 {
		errs = append(errs, &FieldError{"pipelines", errors.New("no pipeline")})
	}
	bad := func(path, format string, args ...any) {
		errs = append(errs, &FieldError{path, fmt.Errorf(format, args...)})
	}
	if f.ServiceURL != "" {
		if err := checkServiceURL(f.ServiceURL); err != nil {
			bad("service_url", "%v", err)
		}
	}
	if (f.TLS.CertFile == "") != (f.TLS.KeyFile == "") {
		bad("tls", "cert_file and key_file go together: set both or neither")
	}
	if f.OperationRetries.Attempts < 0 {
		bad("operation_retries.attempts", "must not be negative")
	}
	if f.OperationRetries.Delay < 0 {
		bad("operation_retries.delay", "must not be negative")
	}
	if f.OperationRetries.Timeout < 0 {
		bad("operation_retries.timeout", "must not be negative")
	}
	if a := f.Telemetry.HTTP; a != "" {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			bad("telemetry.http", "%q: want host:port, such as 127.0.0.1:9090 or :9090", a)
		}
	}
	if t := f.Auth.Token; strings.HasPrefix(t, "file:") && strings.TrimPrefix(strings.TrimPrefix(t, "file:"), "//") == "" {
		bad("auth.token", "file: without a path")
	} else if strings.HasPrefix(t, "env:") && !validVarName(strings.TrimPrefix(t, "env:")) {
		bad("auth.token", "%q: env: names a variable (letters, digits and '_')", t)
	}
	seen := map[string]int{}
	for i := range f.Pipelines {
		p := &f.Pipelines[i]
		prefix := fmt.Sprintf("pipelines[%d]", i)
		if j, dup := seen[p.Name]; dup && p.Name != "" {
			errs = append(errs, &FieldError{prefix + ".name", fmt.Errorf("%q is also the name of pipelines[%d]", p.Name, j)})
		}
		seen[p.Name] = i
		errs = append(errs, p.validate(prefix)...)
	}
	return errors.Join(errs...)
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// Validate checks one pipeline. The error joins a *FieldError for each
// problem found, paths relative to the pipeline ("source.topics[1]").
func (p *Pipeline) Validate() error {
	return errors.Join(p.validate("")...)
}

func (p *Pipeline) validate(prefix string) []error {
	var errs []error
	bad := func(field string, format string, args ...any) {
		path := field
		if prefix != "" {
			path = prefix + "." + field
		}
		errs = append(errs, &FieldError{path, fmt.Errorf(format, args...)})
	}
	topic := func(field, t string) {
		if err := checkTopic(t); err != nil {
			bad(field, "%v", err)
		}
	}

	switch {
	case p.Name == "":
		bad("name", "is required")
	case !nameRE.MatchString(p.Name):
		bad("name", "%q: use letters, digits, '-', '_' and '.'", p.Name)
	}

	s := &p.Source
	switch {
	case len(s.Topics) == 0 && s.Pattern == "":
		bad("source", "set topics or pattern")
	case len(s.Topics) > 0 && s.Pattern != "":
		bad("source", "topics and pattern exclude each other")
	}
	for i, t := range s.Topics {
		topic(fmt.Sprintf("source.topics[%d]", i), t)
	}
	if s.Pattern != "" {
		if err := checkPattern(s.Pattern); err != nil {
			bad("source.pattern", "pattern %v", err)
		}
	}
	if s.Subscription == "" {
		bad("source.subscription", "is required")
	}
	if _, err := ParseSubscriptionType(string(s.Type)); err != nil {
		bad("source.type", "subscription type %v", err)
	}
	if _, err := ParseInitialPosition(string(s.InitialPosition)); err != nil {
		bad("source.initial_position", "%v", err)
	}
	if pos, err := ParsePosition(s.Rewind); err != nil {
		bad("source.rewind", "%v", err)
	} else if pos.Kind == AtMessageID && len(s.Topics) != 1 {
		bad("source.rewind", "a message id needs exactly one topic")
	}
	if s.ReceiverQueue < 0 {
		bad("source.receiver_queue", "must not be negative")
	}

	h := &p.Handler
	var kinds []string
	for _, k := range []struct{ name, v string }{{"plugin", h.Plugin}, {"package", h.Package}, {"script", h.Script}} {
		if k.v != "" {
			kinds = append(kinds, k.name)
		}
	}
	switch {
	case len(kinds) == 0:
		bad("handler", "set one of plugin (a binary), package (a Go package to build) and script (a Python script)")
	case len(kinds) > 1:
		bad("handler", "%s exclude each other: set one", strings.Join(kinds, " and "))
	}
	if msg := h.checkPin(); msg != "" {
		bad("handler.sha256", "%s", msg)
	}
	if h.Python != "" && h.Script == "" {
		bad("handler.python", "only for a script handler")
	}
	for k := range h.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			bad("handler.env", "%q is not a variable name", k)
		}
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"batch_size", h.BatchSize}, {"instances", h.Instances}, {"max_in_flight", h.MaxInFlight}, {"max_batches_in_flight", h.MaxBatchesInFlight}} {
		if f.v < 0 {
			bad("handler."+f.name, "must not be negative")
		}
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"batch_wait", h.BatchWait}, {"timeout", h.Timeout}} {
		if f.v < 0 {
			bad("handler."+f.name, "must not be negative")
		}
	}
	if h.MaxInFlight > 0 && h.MaxInFlight < h.BatchSize {
		bad("handler.max_in_flight", "%d is less than batch_size %d", h.MaxInFlight, h.BatchSize)
	}

	if h.MaxBatchesInFlight > 1 && s.Type.KeepsOrder() {
		bad("handler.max_batches_in_flight", "%d on a %s subscription: it keeps each key's order, so one batch at a time (1)", h.MaxBatchesInFlight, s.Type)
	}

	for i, t := range p.Outputs {
		topic(fmt.Sprintf("outputs[%d]", i), t)
	}

	e := &p.ErrorPolicy
	if e.MaxRetries < 0 {
		bad("error_policy.max_retries", "must not be negative (0 means no limit)")
	}
	if e.MaxCrashes < 0 {
		bad("error_policy.max_crashes", "must not be negative")
	}
	if e.Backoff.Initial < 0 {
		bad("error_policy.backoff.initial", "must not be negative")
	}
	if e.Backoff.Max < 0 {
		bad("error_policy.backoff.max", "must not be negative")
	}
	if e.DeadLetterTopic != "" {
		topic("error_policy.dead_letter_topic", e.DeadLetterTopic)
	}
	return errs
}

// checkServiceURL reports why s is not a service URL:
// pulsar://host[:port][,host[:port]...] or pulsar+ssl://...
func checkServiceURL(s string) error {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return fmt.Errorf("%q: want pulsar://host:port or pulsar+ssl://host:port", s)
	}
	if l := strings.ToLower(scheme); l != "pulsar" && l != "pulsar+ssl" {
		return fmt.Errorf("%q: the scheme must be pulsar or pulsar+ssl, not %q", s, scheme)
	}
	rest = strings.TrimRight(rest, "/")
	if rest == "" {
		return fmt.Errorf("%q: no host", s)
	}
	for _, h := range strings.Split(rest, ",") {
		h = strings.TrimSpace(h)
		if h == "" || strings.ContainsAny(h, "/?#@ ") {
			return fmt.Errorf("%q: bad host %q", s, h)
		}
		if host, port, err := net.SplitHostPort(h); err == nil {
			if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 || host == "" {
				return fmt.Errorf("%q: bad host:port %q", s, h)
			}
		}
	}
	return nil
}
