package steps

// Kind is what a step does.
type Kind uint8

const (
	// Filter keeps the messages for which If is true.
	Filter Kind = iota + 1
	// Map sets fields of the message (Set).
	Map
	// Route sets the topic the message is published to: To, else
	// Default when To gives "" (or is nil).
	Route
	// DeadLetterIf sends the message to the dead-letter topic when If is
	// true, with Reason.
	DeadLetterIf
)

func (k Kind) String() string {
	switch k {
	case Filter:
		return "filter"
	case Map:
		return "map"
	case Route:
		return "route"
	case DeadLetterIf:
		return "dead_letter_if"
	}
	return "unknown"
}

// OnError is what becomes of a message when one of a step's expressions
// fails on it (a missing JSON field, a value of the wrong type, the cost
// limit).
type OnError uint8

const (
	// ErrorDeadLetter sends it to the dead-letter topic with the error as
	// the reason. The default.
	ErrorDeadLetter OnError = iota
	// ErrorDrop acknowledges it, nothing published.
	ErrorDrop
	// ErrorSkip goes on as if the step were not there.
	ErrorSkip
)

func (o OnError) String() string {
	switch o {
	case ErrorDeadLetter:
		return "dead_letter"
	case ErrorDrop:
		return "drop"
	case ErrorSkip:
		return "skip"
	}
	return "unknown"
}

// Field is a field of a message a map step sets.
type Field uint8

const (
	FieldPayload Field = iota + 1
	FieldKey
	FieldOrderingKey
	FieldEventTime
	// FieldProperty sets the property Assign.Name.
	FieldProperty
)

// Want is what an expression setting f must give.
func (f Field) Want() Want {
	switch f {
	case FieldPayload:
		return WantPayload
	case FieldEventTime:
		return WantTime
	}
	return WantString
}

// Assign is one field a map step sets.
type Assign struct {
	Field Field
	Name  string // FieldProperty: the property's name
	Expr  *Expr
}

// Step is one compiled step.
type Step struct {
	// Name names it in metrics, traces and dead-letter reasons.
	Name string
	Kind Kind
	// If is the condition of Filter and DeadLetterIf.
	If *Expr
	// Reason is DeadLetterIf's reason; nil: "dead_letter_if <name>".
	Reason *Expr
	// Set are Map's fields. Every expression of one map step sees the
	// message as it was before the step.
	Set []Assign
	// To and Default are Route's.
	To      *Expr
	Default string
	OnError OnError
}
