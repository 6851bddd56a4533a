package benchrun

import (
	"fmt"
	"os"
	"regexp"

	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/subscribe"
)

// Kind is what a run measures: the Bench method it calls.
type Kind string

// The kinds of run.
const (
	KindProduce  Kind = "produce"  // Bench.Produce
	KindConsume  Kind = "consume"  // Bench.Consume
	KindPipeline Kind = "pipeline" // Bench.Pipeline
)

// MaxPartitions is the most partitions Options.Partitions may ask for.
const MaxPartitions = 10000

// OptionError is an Options value Check refuses. Msg names the fields
// it is about in braces, "{Keys}", as the Options fields are spelled
// ("{Handler.BatchSize}"), so that a command can name its flags instead
// (Text).
type OptionError struct {
	Msg string
}

func (e *OptionError) Error() string {
	return "benchrun: " + e.Text(func(field string) string { return field })
}

// fieldRef is a field's name in an OptionError's Msg.
var fieldRef = regexp.MustCompile(`\{([A-Za-z.]+)\}`)

// Text is the message with each field named by name(field).
func (e *OptionError) Text(name func(field string) string) string {
	return fieldRef.ReplaceAllStringFunc(e.Msg, func(ref string) string { return name(ref[1 : len(ref)-1]) })
}

func optionErrorf(format string, a ...any) error {
	return &OptionError{Msg: fmt.Sprintf(format, a...)}
}

// Check refuses, as an *OptionError, options a run of kind cannot go
// with: a negative number, fields that exclude each other, a field
// another needs (a KeyShared subscription needs Keys: messages without a
// key all go to one consumer), a topic name or plugin file that is not
// one. It only reads (a plugin file's existence); Start does not call it.
func (o Options) Check(kind Kind) error {
	checks := []struct {
		bad bool
		msg string
	}{
		{o.Size < 0, fmt.Sprintf("{Size} must not be negative, got %d", o.Size)},
		{o.Rate < 0, fmt.Sprintf("{Rate} must not be negative, got %v", o.Rate)},
		{o.Count < 0, fmt.Sprintf("{Count} must not be negative, got %d", o.Count)},
		{o.Duration < 0, fmt.Sprintf("{Duration} must not be negative, got %s", o.Duration)},
		{o.Count > 0 && o.Duration > 0, "{Count} and {Duration} exclude each other"},
		{o.Partitions < 0 || o.Partitions > MaxPartitions, fmt.Sprintf("{Partitions} must be from 1 to %d (0 or 1: not partitioned), got %d", MaxPartitions, o.Partitions)},
		{o.Keys < 0, fmt.Sprintf("{Keys} must not be negative, got %d", o.Keys)},
		{o.Topics < 0, fmt.Sprintf("{Topics} must not be negative, got %d", o.Topics)},
		{o.Pattern && o.Topics < 2, "{Pattern} needs {Topics} 2 or more"},
		{o.Pipelines < 0, fmt.Sprintf("{Pipelines} must not be negative, got %d", o.Pipelines)},
		{o.Producer.Batching.MaxMessages < 0, fmt.Sprintf("{Producer.Batching.MaxMessages} must not be negative, got %d", o.Producer.Batching.MaxMessages)},
		{o.Producer.Batching.MaxBytes < 0, fmt.Sprintf("{Producer.Batching.MaxBytes} must not be negative, got %d", o.Producer.Batching.MaxBytes)},
		{o.Producer.Batching.MaxDelay < 0, fmt.Sprintf("{Producer.Batching.MaxDelay} must not be negative, got %s", o.Producer.Batching.MaxDelay)},
		{o.Producer.MaxPendingMessages < 0, fmt.Sprintf("{Producer.MaxPendingMessages} must not be negative, got %d", o.Producer.MaxPendingMessages)},
		{o.ProgressEvery < 0, fmt.Sprintf("{ProgressEvery} must not be negative, got %s", o.ProgressEvery)},
		{o.CloseTimeout <= 0, fmt.Sprintf("{CloseTimeout} must be positive, got %s", o.CloseTimeout)},
		{o.Memory && o.Sync, "{Memory} and {Sync} exclude each other"},
		{o.ServiceURL != "" && (o.Memory || o.Sync), "{Memory} and {Sync} are for the embedded broker, not {ServiceURL}"},
	}
	for _, c := range checks {
		if c.bad {
			return optionErrorf("%s", c.msg)
		}
	}
	if o.Topic != "" {
		if _, err := pulsarwire.ParseTopic(o.Topic); err != nil {
			return optionErrorf("{Topic}: %v", err)
		}
	}
	if kind == KindProduce {
		return nil
	}
	switch {
	case o.Subscription == "":
		return optionErrorf("{Subscription} must not be empty")
	case o.ReceiverQueue < 0:
		return optionErrorf("{ReceiverQueue} must not be negative, got %d", o.ReceiverQueue)
	case o.DrainTimeout <= 0:
		return optionErrorf("{DrainTimeout} must be positive, got %s", o.DrainTimeout)
	case o.Type == subscribe.KeyShared && o.Keys == 0:
		return optionErrorf("{Type} key_shared needs {Keys}: messages without a key all go to one consumer")
	case kind == KindConsume && !o.Produce && o.Count == 0 && o.Duration == 0:
		return optionErrorf("{Produce} false needs {Count} or {Duration}: how much to receive")
	case kind == KindConsume:
		return nil
	case o.Handler.State && o.Keys < 1:
		return optionErrorf("{Handler.State} needs {Keys} 1 or more: keyed state counts per key, got %d", o.Keys)
	case o.Handler.State && o.Type != subscribe.Exclusive:
		return optionErrorf("{Handler.State} needs {Type} exclusive: a key's count is kept by one consumer at a time, got %s", o.Type.Name())
	case o.Handler.State && (o.Handler.Plugin != "" || o.Handler.Package != "" || o.Handler.Steps):
		return optionErrorf("{Handler.State} runs streamrun's own counter, as a plugin or {Handler.InProcess}: {Handler.Plugin}, {Handler.Package} and {Handler.Steps} exclude it")
	}
	return o.Handler.check()
}

// check refuses a pipeline's handler options that do not go together.
func (ho HandlerOptions) check() error {
	if ho.Config != nil && ho.Plugin == "" && ho.Package == "" {
		return optionErrorf("{Handler.Config} is for a handler of your own: {Handler.Plugin} or {Handler.Package}")
	}
	n := 0
	for _, set := range []bool{ho.InProcess, ho.Plugin != "", ho.Package != "", ho.Steps} {
		if set {
			n++
		}
	}
	switch {
	case n > 1:
		return optionErrorf("{Handler.InProcess}, {Handler.Steps}, {Handler.Plugin} and {Handler.Package} exclude each other")
	case ho.BatchSize < 1:
		return optionErrorf("{Handler.BatchSize} must be at least 1, got %d", ho.BatchSize)
	case ho.CommitInterval < 0:
		return optionErrorf("{Handler.CommitInterval} must not be negative, got %s", ho.CommitInterval)
	case ho.Instances < 1:
		return optionErrorf("{Handler.Instances} must be at least 1, got %d", ho.Instances)
	case ho.Plugin != "":
		if _, err := os.Stat(ho.Plugin); err != nil {
			return optionErrorf("{Handler.Plugin}: %v", err)
		}
	}
	return nil
}
