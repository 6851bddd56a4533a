package pipelines

import (
	"fmt"
	"strings"
	"time"
)

// Window groups each key's messages into windows of time (docs/pipelines.md,
// "Windows"): the host keeps a window's messages until the watermark says
// no more can come, then hands the window to the handler as one message.
type Window struct {
	// Type is tumbling (fixed windows of Size, one after another),
	// sliding (windows of Size starting every Slide) or session (a key's
	// messages closer than Gap to the next). Default "": no windows.
	Type WindowType `yaml:"type,omitempty" json:"type,omitempty" reload:"source"`
	// Size of a tumbling or sliding window.
	Size time.Duration `yaml:"size,omitempty" json:"size,omitempty" reload:"source"`
	// Slide is how far apart sliding windows start; at most Size, and a
	// divisor of it.
	Slide time.Duration `yaml:"slide,omitempty" json:"slide,omitempty" reload:"source"`
	// Gap closes a session window: a key's session ends Gap after its
	// last message.
	Gap time.Duration `yaml:"gap,omitempty" json:"gap,omitempty" reload:"source"`
	// Time is the time a message is placed by: processing (when the host
	// received it), publish (when the broker stored it), event (the
	// producer's event time) or field (a field of the JSON payload, named
	// by TimeField). Default event with a window.
	Time WindowTime `yaml:"time,omitempty" json:"time,omitempty" reload:"source"`
	// TimeField is the payload's field holding the time with time: field,
	// a dotted path ("order.ts") to a number of Unix milliseconds or an
	// RFC 3339 string.
	TimeField string `yaml:"time_field,omitempty" json:"time_field,omitempty" reload:"source"`
	// OutOfOrder is how far behind the newest time seen on a partition a
	// message may come and still be on time: the partition's watermark
	// is its newest time less OutOfOrder. Default 0.
	OutOfOrder time.Duration `yaml:"out_of_order,omitempty" json:"out_of_order,omitempty" reload:"source"`
	// AllowedLateness keeps a window after it fired, for that much more
	// watermark: a message that comes for it then fires it again, whole.
	// Default 0.
	AllowedLateness time.Duration `yaml:"allowed_lateness,omitempty" json:"allowed_lateness,omitempty" reload:"source"`
	// LateTopic receives the messages that come after every window they
	// belong to was closed for good. Default "": they are dropped and
	// counted (reason "late").
	LateTopic string `yaml:"late_topic,omitempty" json:"late_topic,omitempty" reload:"source"`
	// IdleTimeout is how long a partition may send nothing before its
	// watermark stops holding the pipeline's back. Default 30s with a
	// window.
	IdleTimeout time.Duration `yaml:"idle_timeout,omitempty" json:"idle_timeout,omitempty" reload:"source"`
	// Changelog is the topic the open windows are written to (each
	// message, the watermarks, which windows fired), meant to be
	// compacted. Default "<subscription>-windows" in the namespace of the
	// source's first topic.
	Changelog string `yaml:"changelog,omitempty" json:"changelog,omitempty" reload:"source"`
	// Mode is what the host keeps of an open window: messages (every
	// message, handed over together when the window fires) or
	// incremental (one accumulator the handler owns, which it updates
	// with each new batch of the window's messages and gets when the
	// window fires; tumbling and sliding windows only). Default messages.
	Mode WindowMode `yaml:"mode,omitempty" json:"mode,omitempty" reload:"source"`
}

// WindowMode is what the host keeps of an open window.
type WindowMode string

// Window modes.
const (
	ModeMessages    WindowMode = "messages"
	ModeIncremental WindowMode = "incremental"
)

// Incremental says whether w keeps an accumulator per window.
func (w *Window) Incremental() bool {
	return WindowMode(strings.ToLower(string(w.Mode))) == ModeIncremental
}

// DefaultWindowIdleTimeout is Window.IdleTimeout's default.
const DefaultWindowIdleTimeout = 30 * time.Second

// WindowType is the kind of a window.
type WindowType string

// Window types.
const (
	Tumbling WindowType = "tumbling"
	Sliding  WindowType = "sliding"
	Session  WindowType = "session"
)

// WindowTime is where a message's time comes from.
type WindowTime string

// Window times.
const (
	TimeProcessing WindowTime = "processing"
	TimePublish    WindowTime = "publish"
	TimeEvent      WindowTime = "event"
	TimeField      WindowTime = "field"
)

// WindowChangelogTopic is the changelog topic of p's windows:
// Window.Changelog or its default.
func (p *Pipeline) WindowChangelogTopic() string {
	if t := p.Window.Changelog; t != "" {
		return t
	}
	state := p.ChangelogTopic()
	return strings.TrimSuffix(state, "-state") + "-windows"
}

// window checks the window block. Windows are kept per key by one host,
// as keyed state is, so they need an Exclusive subscription for the same
// reasons (see state).
func (c *checker) window(p *Pipeline) {
	w := &p.Window
	if w.Type == "" {
		if *w != (Window{}) {
			c.bad("window.type", "is not set, and window has settings: set tumbling, sliding or session")
		}
		return
	}
	switch WindowType(strings.ToLower(string(w.Type))) {
	case Tumbling:
		c.positive("window.size", w.Size)
		c.notFor("window.slide", w.Slide != 0, w.Type)
		c.notFor("window.gap", w.Gap != 0, w.Type)
	case Sliding:
		c.positive("window.size", w.Size)
		c.positive("window.slide", w.Slide)
		if w.Slide > 0 && w.Size > 0 && (w.Slide > w.Size || w.Size%w.Slide != 0) {
			c.bad("window.slide", "%s does not divide size %s: a sliding window's slide is at most its size and a divisor of it", w.Slide, w.Size)
		}
		c.notFor("window.gap", w.Gap != 0, w.Type)
	case Session:
		c.positive("window.gap", w.Gap)
		c.notFor("window.size", w.Size != 0, w.Type)
		c.notFor("window.slide", w.Slide != 0, w.Type)
	default:
		c.bad("window.type", "%q: use tumbling, sliding or session", w.Type)
	}
	switch WindowTime(strings.ToLower(string(w.Time))) {
	case "", TimeProcessing, TimePublish, TimeEvent:
		if w.TimeField != "" {
			c.bad("window.time_field", "only with time: field")
		}
	case TimeField:
		if w.TimeField == "" {
			c.bad("window.time_field", "time: field needs the payload's field that holds the time (\"ts\", \"order.ts\")")
		}
	default:
		c.bad("window.time", "%q: use processing, publish, event or field", w.Time)
	}
	switch WindowMode(strings.ToLower(string(w.Mode))) {
	case "", ModeMessages:
	case ModeIncremental:
		if WindowType(strings.ToLower(string(w.Type))) == Session {
			c.bad("window.mode", "incremental is for tumbling and sliding windows: sessions merge, and an accumulator has no merge step")
		}
	default:
		c.bad("window.mode", "%q: use messages or incremental", w.Mode)
	}
	if w.LateTopic != "" {
		c.topic("window.late_topic", w.LateTopic)
	}
	if w.Changelog != "" {
		c.topic("window.changelog", w.Changelog)
	}
	if !p.HasHandler() {
		c.bad("window", "a window is handed to a handler, and this pipeline has none")
	}
	if p.State.Enabled {
		c.bad("window", "a pipeline keeps windows or keyed state, not both")
	}
	if t, ok := p.Source.Type.Canonical(); ok && t != Exclusive {
		c.bad("source.type", "windows need an Exclusive subscription: a key's window must see every message of the key, at one host")
	}
}

func (c *checker) positive(field string, d time.Duration) {
	if d <= 0 {
		c.bad(field, "must be more than 0")
	}
}

func (c *checker) notFor(field string, set bool, t WindowType) {
	if set {
		c.bad(field, "%s", fmt.Sprintf("not for a %s window", t))
	}
}
