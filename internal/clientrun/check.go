package clientrun

import (
	"fmt"
	"os"
	"regexp"

	"github.com/streamrun/streamrun/pulsarwire"
)

// OptionError is an option Check refuses. Msg names the fields it is
// about in braces, as the options spell them ("{ConnectTimeout}",
// "{Subscribe.Topics}"), so that a command can name its flags instead
// (Text).
type OptionError struct {
	Msg string
}

func (e *OptionError) Error() string {
	return "clientrun: " + e.Text(func(field string) string { return field })
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

// Check refuses, as an *OptionError, a connection that could not be
// made as asked: negative retries, a bound that is not positive, a
// client certificate without its key, a service URL that does not
// parse, a TLS file that does not read (so that a wrong path is named
// before anything is dialed). It only reads.
func (c Conn) Check() error {
	tls := c.Client.TLS
	switch {
	case c.Client.OperationRetries.Attempts < 0:
		return optionErrorf("{Client.OperationRetries.Attempts} must not be negative, got %d", c.Client.OperationRetries.Attempts)
	case c.ConnectTimeout <= 0:
		return optionErrorf("{ConnectTimeout} must be positive, got %s", c.ConnectTimeout)
	case c.CloseTimeout <= 0:
		return optionErrorf("{CloseTimeout} must be positive, got %s", c.CloseTimeout)
	case (tls.CertFile == "") != (tls.KeyFile == ""):
		return optionErrorf("{Client.TLS.CertFile} and {Client.TLS.KeyFile} go together")
	}
	if _, err := pulsarwire.ParseServiceURL(c.Client.ServiceURL); err != nil {
		return optionErrorf("{Client.ServiceURL} %q: %v", c.Client.ServiceURL, err)
	}
	for _, f := range []struct{ field, path string }{{"Client.TLS.CAFile", tls.CAFile}, {"Client.TLS.CertFile", tls.CertFile}, {"Client.TLS.KeyFile", tls.KeyFile}} {
		if f.path == "" {
			continue
		}
		if _, err := os.ReadFile(f.path); err != nil {
			return optionErrorf("{%s}: %v", f.field, err)
		}
	}
	return nil
}

// Check refuses, as an *OptionError, a consume that Consume could not
// do as asked: Conn's refusals, Topics and Pattern both, no
// Subscription, a negative Each.Count or Each.Idle, a topic name that is
// not one, a rewind to a message id over other than one topic; then
// what subscribe.Options.Validate refuses, as its error.
func (o ConsumeOptions) Check() error {
	if err := o.Conn.Check(); err != nil {
		return err
	}
	s := o.Subscribe
	switch {
	case len(s.Topics) > 0 && s.Pattern != "":
		return optionErrorf("{Subscribe.Topics} and {Subscribe.Pattern} exclude each other")
	case s.Subscription == "":
		return optionErrorf("{Subscribe.Subscription} is required")
	case o.Each.Count < 0:
		return optionErrorf("{Each.Count} must not be negative, got %d", o.Each.Count)
	case o.Each.Idle < 0:
		return optionErrorf("{Each.Idle} must not be negative, got %s", o.Each.Idle)
	}
	for _, t := range s.Topics {
		if _, err := pulsarwire.ParseTopic(t); err != nil {
			return optionErrorf("{Subscribe.Topics}: %v", err)
		}
	}
	if _, isID := s.Rewind.MessageID(); isID && (s.Pattern != "" || len(s.Topics) != 1) {
		return optionErrorf("{Subscribe.Rewind} with a message id needs exactly one {Subscribe.Topics}")
	}
	return s.Validate()
}

// Check refuses, as an *OptionError, a produce that Produce could not
// do as asked: Conn's refusals, no Topic or one that is not a topic
// name, a negative Rate, batching by key with batching off.
func (o ProduceOptions) Check() error {
	if err := o.Conn.Check(); err != nil {
		return err
	}
	if o.Topic == "" {
		return optionErrorf("{Topic} is required")
	}
	if _, err := pulsarwire.ParseTopic(o.Topic); err != nil {
		return optionErrorf("{Topic}: %v", err)
	}
	b := o.Client.Producer.Batching
	switch {
	case o.Rate < 0:
		return optionErrorf("{Rate} must not be negative, got %v", o.Rate)
	case b.ByKey && b.Disabled:
		return optionErrorf("{Client.Producer.Batching.ByKey} and {Client.Producer.Batching.Disabled} exclude each other")
	}
	return nil
}
