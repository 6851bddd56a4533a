package steps

import (
	"fmt"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/ext"
)

// Names of the variables an expression sees. After a handler (steps that
// act on its outputs) they are the output's, except publish_time,
// message_id and redelivery_count, which stay the input's.
const (
	// VarPayload is the payload, as bytes.
	VarPayload = "payload"
	// VarText is the payload as a string; using it on a payload that is
	// not UTF-8 is an error of that message.
	VarText = "text"
	// VarJSON is the payload parsed as JSON (objects are maps, arrays
	// lists, numbers doubles, as CEL reads JSON); using it on a payload
	// that is not JSON is an error of that message.
	VarJSON = "json"
	// VarKey is the message's key ("" when it has none).
	VarKey = "key"
	// VarOrderingKey is its ordering key ("" when none).
	VarOrderingKey = "ordering_key"
	// VarProperties are its properties, a map(string, string).
	VarProperties = "properties"
	// VarTopic is the full name of the topic (or partition) it came from.
	VarTopic = "topic"
	// VarPublishTime is when it was published, a timestamp.
	VarPublishTime = "publish_time"
	// VarEventTime is its event time, a timestamp; timestamp(0)
	// (1970-01-01T00:00:00Z) when the producer set none.
	VarEventTime = "event_time"
	// VarMessageID is its id, "ledger:entry:partition:batch".
	VarMessageID = "message_id"
	// VarRedeliveryCount is how many times the broker delivered it before.
	VarRedeliveryCount = "redelivery_count"
)

// Options configure an Env. The zero value takes every default.
type Options struct {
	// CostLimit bounds one evaluation of one expression, in CEL's cost
	// units (about one per operation; string functions count the bytes
	// they touch, a tenth each). An evaluation that reaches it stops with
	// an error, which is the message's outcome. Default 1,000,000, the
	// per-expression limit Kubernetes applies to its CEL rules. A string
	// function costs about one unit a byte it reads, so a payload near a
	// megabyte run through one needs a higher limit.
	CostLimit uint64
	// MaxSize is the size in bytes that the payload, key, ordering key,
	// properties (together) and topic are each assumed not to exceed when
	// an expression's worst-case cost is estimated at compile time: an
	// expression whose estimate is within CostLimit evaluates such
	// messages without the run-time cost tracker (a quarter of a
	// microsecond an evaluation). A larger message is evaluated under the
	// tracker. Default 64 KiB: most messages are smaller, and an
	// expression making a few passes over a payload that size (a string
	// function costs about one unit a byte) stays within the default
	// CostLimit.
	MaxSize int
}

// Defaults of Options.
const (
	DefaultCostLimit = 1_000_000
	DefaultMaxSize   = 64 << 10
)

func (o Options) withDefaults() Options {
	if o.CostLimit == 0 {
		o.CostLimit = DefaultCostLimit
	}
	if o.MaxSize <= 0 {
		o.MaxSize = DefaultMaxSize
	}
	return o
}

// Env compiles expressions over messages. It is safe for concurrent use.
type Env struct {
	cel  *cel.Env
	opts Options
}

// NewEnv makes an environment: the variables above, CEL's standard
// library, its string extensions (upperAscii, lowerAscii, replace, split,
// trim, substring, indexOf, format, ...) and base64 encoding, and
// comparisons across numeric types (a JSON number, a double, compares
// with an int literal: json.amount >= 0). Making one takes a few
// milliseconds: make it once per load.
func NewEnv(opts Options) (*Env, error) {
	env, err := cel.NewEnv(
		cel.Variable(VarPayload, cel.BytesType),
		cel.Variable(VarText, cel.StringType),
		cel.Variable(VarJSON, cel.DynType),
		cel.Variable(VarKey, cel.StringType),
		cel.Variable(VarOrderingKey, cel.StringType),
		cel.Variable(VarProperties, cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable(VarTopic, cel.StringType),
		cel.Variable(VarPublishTime, cel.TimestampType),
		cel.Variable(VarEventTime, cel.TimestampType),
		cel.Variable(VarMessageID, cel.StringType),
		cel.Variable(VarRedeliveryCount, cel.IntType),
		ext.Strings(),
		ext.Encoders(),
		cel.CrossTypeNumericComparisons(true),
		cel.DefaultUTCTimeZone(true),
	)
	if err != nil {
		return nil, fmt.Errorf("steps: expression environment: %w", err)
	}
	return &Env{cel: env, opts: opts.withDefaults()}, nil
}

// Options are the env's, with defaults.
func (e *Env) Options() Options { return e.opts }

// sizes tells CEL's cost estimator how large what a message holds can be:
// every variable, and everything reached through one, at most MaxSize.
type sizes struct{ max uint64 }

func (s sizes) EstimateSize(n cost.AstNode) *cost.SizeEstimate {
	if p := n.Path(); len(p) > 0 {
		switch p[0] {
		case VarPayload, VarText, VarJSON, VarKey, VarOrderingKey, VarProperties, VarTopic, VarMessageID:
			return &cost.SizeEstimate{Min: 0, Max: s.max}
		}
	}
	return nil
}

func (s sizes) EstimateCallCost(function, overloadID string, target *cost.AstNode, args []cost.AstNode) *cost.CallEstimate {
	return nil
}
