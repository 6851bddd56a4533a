package pipelines

import (
	"errors"
	"fmt"
	"net"
	"reflect"
	"regexp"
	"strings"

	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/steps"
)

// FieldError is one problem with one field. Path names the field the way
// the file spells it ("pipelines[0].source.topics[1]"), so that a loader
// can point at its line.
type FieldError struct {
	Path string
	Err  error
	// Offset is where in the field's value the problem is, in characters
	// from its start (an expression's problem); 0 for the value as a whole.
	Offset int
}

func (e *FieldError) Error() string { return e.Path + ": " + e.Err.Error() }

func (e *FieldError) Unwrap() error { return e.Err }

// Validate checks every pipeline of the file and that their names are
// distinct. The error joins a *FieldError for each problem found.
func (f *File) Validate() error {
	c := &checker{env: &lazyEnv{}}
	if len(f.Pipelines) == 0 {
		c.bad("pipelines", "no pipeline")
	}
	c.fileSettings(f)
	seen := map[string]int{}
	for i := range f.Pipelines {
		p := &f.Pipelines[i]
		prefix := fmt.Sprintf("pipelines[%d]", i)
		if j, dup := seen[p.Name]; dup && p.Name != "" {
			c.bad(prefix+".name", "%q is also the name of pipelines[%d]", p.Name, j)
		}
		seen[p.Name] = i
		c.errs = append(c.errs, p.validate(prefix, c.env)...)
	}
	return errors.Join(c.errs...)
}

// fileSettings checks what the file sets for all its pipelines: the
// broker to reach, how, and where telemetry is served.
func (c *checker) fileSettings(f *File) {
	if f.ServiceURL != "" {
		if _, err := pulsarwire.ParseServiceURL(f.ServiceURL); err != nil {
			c.bad("service_url", "%q: %v", f.ServiceURL, err)
		}
	}
	if (f.TLS.CertFile == "") != (f.TLS.KeyFile == "") {
		c.bad("tls", "cert_file and key_file go together: set both or neither")
	}
	if f.OperationRetries.Attempts < 0 {
		c.bad("operation_retries.attempts", "must not be negative")
	}
	if f.OperationRetries.Delay < 0 {
		c.bad("operation_retries.delay", "must not be negative")
	}
	if f.OperationRetries.Timeout < 0 {
		c.bad("operation_retries.timeout", "must not be negative")
	}
	if a := f.Telemetry.HTTP; a != "" {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			c.bad("telemetry.http", "%q: want host:port, such as 127.0.0.1:9090 or :9090", a)
		}
	}
	c.authToken(f.Auth.Token)
	c.control(&f.Control)
}

// control checks the control section: an address, TLS files in pairs, one
// token key written as file:PATH or env:VAR.
func (c *checker) control(ct *Control) {
	if a := ct.HTTP; a != "" {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			c.bad("control.http", "%q: want host:port, such as 127.0.0.1:9470 or :9470", a)
		}
	}
	if (ct.CertFile == "") != (ct.KeyFile == "") {
		c.bad("control", "cert_file and key_file go together: set both or neither")
	}
	if ct.TokenSecretKey != "" && ct.TokenPublicKey != "" {
		c.bad("control", "token_secret_key and token_public_key exclude each other")
	}
	for _, k := range []struct{ field, v string }{{"control.token_secret_key", ct.TokenSecretKey}, {"control.token_public_key", ct.TokenPublicKey}} {
		if k.v != "" && !strings.HasPrefix(k.v, "file:") && !strings.HasPrefix(k.v, "env:") {
			c.bad(k.field, "want file:PATH or env:VAR (the key itself stays out of the file)")
		}
	}
}

// authToken checks the token's source: file: needs a path, env: a
// variable name; anything else is the token itself.
func (c *checker) authToken(t string) {
	if strings.HasPrefix(t, "file:") && strings.TrimPrefix(strings.TrimPrefix(t, "file:"), "//") == "" {
		c.bad("auth.token", "file: without a path")
	} else if strings.HasPrefix(t, "env:") && !validVarName(strings.TrimPrefix(t, "env:")) {
		c.bad("auth.token", "%q: env: names a variable (letters, digits and '_')", t)
	}
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// Validate checks one pipeline. The error joins a *FieldError for each
// problem found, paths relative to the pipeline ("source.topics[1]").
func (p *Pipeline) Validate() error {
	return errors.Join(p.validate("", &lazyEnv{})...)
}

// validate checks the pipeline one field group at a time, in the order
// the file lists them, so that the problems come out in that order too.
func (p *Pipeline) validate(prefix string, env *lazyEnv) []error {
	c := &checker{prefix: prefix, env: env}
	c.name(p.Name)
	c.source(&p.Source)
	c.handler(&p.Handler, p.Source.Type, len(p.Steps) > 0)
	c.checkSteps(p, env.get)
	for i, t := range p.Outputs {
		c.topic(fmt.Sprintf("outputs[%d]", i), t)
	}
	c.errorPolicy(&p.ErrorPolicy)
	c.state(p)
	c.window(p)
	c.guarantee(p)
	c.counts(p)
	return c.errs
}

// counts checks every number of the pipeline, found by its declared
// fields: counts, sizes and durations are never negative.
func (c *checker) counts(p *Pipeline) {
	v := reflect.ValueOf(p).Elem()
	for _, f := range PipelineFields() {
		if fv := v.FieldByIndex(f.index); fv.CanInt() && fv.Int() < 0 {
			c.bad(f.Path, "must not be negative")
		}
	}
}

// checker collects the problems of one pipeline, each a *FieldError at a
// path under prefix.
type checker struct {
	prefix string
	errs   []error
	env    *lazyEnv // compiles steps' expressions
}

func (c *checker) bad(field string, format string, args ...any) {
	c.badAt(field, 0, format, args...)
}

// badAt is a problem offset characters into the field's value.
func (c *checker) badAt(field string, offset int, format string, args ...any) {
	path := field
	if c.prefix != "" {
		path = c.prefix + "." + field
	}
	c.errs = append(c.errs, &FieldError{Path: path, Err: fmt.Errorf(format, args...), Offset: offset})
}

// lazyEnv makes the steps' expression environment once, for the first
// pipeline with steps: it takes milliseconds, and most files have none.
type lazyEnv struct {
	env *steps.Env
	err error
}

func (l *lazyEnv) get() (*steps.Env, error) {
	if l.env == nil && l.err == nil {
		l.env, l.err = steps.NewEnv(steps.Options{})
	}
	return l.env, l.err
}

func (c *checker) topic(field, t string) {
	if err := checkTopic(t); err != nil {
		c.bad(field, "%v", err)
	}
}

func (c *checker) name(name string) {
	switch {
	case name == "":
		c.bad("name", "is required")
	case !nameRE.MatchString(name):
		c.bad("name", "%q: use letters, digits, '-', '_' and '.'", name)
	}
}

// source checks where the messages come from: topics or a pattern, and
// how the subscription reads them.
func (c *checker) source(s *Source) {
	switch {
	case len(s.Topics) == 0 && s.Pattern == "":
		c.bad("source", "set topics or pattern")
	case len(s.Topics) > 0 && s.Pattern != "":
		c.bad("source", "topics and pattern exclude each other")
	}
	for i, t := range s.Topics {
		c.topic(fmt.Sprintf("source.topics[%d]", i), t)
	}
	if s.Pattern != "" {
		if err := checkPattern(s.Pattern); err != nil {
			c.bad("source.pattern", "pattern %v", err)
		}
	}
	if s.Subscription == "" {
		c.bad("source.subscription", "is required")
	}
	if _, err := ParseSubscriptionType(string(s.Type)); err != nil {
		c.bad("source.type", "subscription type %v", err)
	}
	if _, err := ParseInitialPosition(string(s.InitialPosition)); err != nil {
		c.bad("source.initial_position", "%v", err)
	}
	c.rewind(s)
}

// rewind checks source.rewind: a position, and a message id only where
// there is one topic for it to belong to.
func (c *checker) rewind(s *Source) {
	if pos, err := ParsePosition(s.Rewind); err != nil {
		c.bad("source.rewind", "%v", err)
	} else if pos.Kind == AtMessageID && len(s.Topics) != 1 {
		c.bad("source.rewind", "a message id needs exactly one topic")
	}
}

// handler checks what runs the messages and how many at a time; typ is
// the source's subscription type, which bounds the batches in flight.
func (c *checker) handler(h *Handler, typ SubscriptionType, hasSteps bool) {
	c.handlerKind(h, hasSteps)
	for k := range h.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			c.bad("handler.env", "%q is not a variable name", k)
		}
	}
	if h.MaxInFlight > 0 && h.MaxInFlight < h.BatchSize {
		c.bad("handler.max_in_flight", "%d is less than batch_size %d", h.MaxInFlight, h.BatchSize)
	}
	if h.MaxBatchesInFlight > 1 && typ.KeepsOrder() {
		c.bad("handler.max_batches_in_flight", "%d on a %s subscription: it keeps each key's order, so one batch at a time (1)", h.MaxBatchesInFlight, typ)
	}
}

// handlerKind checks that exactly one of plugin, package and script is
// set, and that python goes only with a script.
func (c *checker) handlerKind(h *Handler, hasSteps bool) {
	var kinds []string
	for _, k := range []struct{ name, v string }{{"plugin", h.Plugin}, {"package", h.Package}, {"script", h.Script}} {
		if k.v != "" {
			kinds = append(kinds, k.name)
		}
	}
	switch {
	case len(kinds) == 0 && hasSteps:
		// The steps alone: the handler's fields that say how to start one
		// have nothing to apply to.
		for _, f := range []struct {
			name string
			set  bool
		}{{"args", len(h.Args) > 0}, {"env", len(h.Env) > 0}, {"config", len(h.Config) > 0}, {"sha256", h.SHA256 != ""}, {"python", h.Python != ""}} {
			if f.set {
				c.bad("handler."+f.name, "only with a handler (plugin, package or script); a pipeline of steps alone has none")
			}
		}
		return
	case len(kinds) == 0:
		c.bad("handler", "set one of plugin (a binary), package (a Go package to build) and script (a Python script), or give the pipeline steps")
	case len(kinds) > 1:
		c.bad("handler", "%s exclude each other: set one", strings.Join(kinds, " and "))
	}
	if msg := h.checkPin(); msg != "" {
		c.bad("handler.sha256", "%s", msg)
	}
	if h.Python != "" && h.Script == "" {
		c.bad("handler.python", "only for a script handler")
	}
}

// errorPolicy checks the retry, crash and dead-letter settings.
func (c *checker) errorPolicy(e *ErrorPolicy) {
	if e.DeadLetterTopic != "" {
		c.topic("error_policy.dead_letter_topic", e.DeadLetterTopic)
	}
}

// state checks the keyed state settings. Keyed state is kept by one
// host for a key at a time, so the subscription must give each key to
// one consumer at a time, and hand it over only once that consumer is
// gone: Exclusive does (a second host waits until the first leaves,
// then reads the changelog). Shared gives a key's messages to any
// consumer at once, so two hosts would change one value each from what
// it was; Failover and Key_Shared move keys between consumers that are
// both running, and a host taking keys over would need to read the
// changelog past every change the other made first, which is not built.
func (c *checker) state(p *Pipeline) {
	st := &p.State
	if !st.Enabled {
		if st.Changelog != "" || st.TTL != 0 || st.CacheBytes != 0 {
			c.bad("state.enabled", "is false, and state has settings: set enabled: true to keep state")
		}
		return
	}
	if !p.HasHandler() {
		c.bad("state", "keyed state is for a handler, and this pipeline has none")
	}
	t, ok := p.Source.Type.Canonical()
	if !ok {
		return // source.type's own check says what is wrong
	}
	if p.Source.Type == "" {
		t = Shared
	}
	switch t {
	case Exclusive:
	case Shared:
		c.bad("source.type", "keyed state needs an Exclusive subscription: on Shared, messages of one key go to several consumers at once, and each would change the key's value from what it was")
	default:
		c.bad("source.type", "keyed state needs an Exclusive subscription: %s moves keys between running consumers, and a consumer taking a key over could read its value before the other's last change", p.Source.Type)
	}
	if st.Changelog != "" {
		c.topic("state.changelog", st.Changelog)
	}
	if st.CacheBytes < 0 {
		c.bad("state.cache_bytes", "is %d: the memory for the state's values is a number of bytes, at least 1 (default %d, 512 MiB)", st.CacheBytes, DefaultStateCacheBytes)
	}
}
