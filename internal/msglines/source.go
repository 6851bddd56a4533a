package msglines

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/streamrun/streamrun/pool"
)

// Source is the messages `streamrun produce` publishes: the lines of
// Input, or else Generated.
type Source struct {
	// Input names a file whose non-empty lines are the messages, read to
	// its end; "-" reads Stdin. Default "": Generated.
	Input string
	// Stdin is what Input "-" reads. Default nil: os.Stdin.
	Stdin io.Reader
	// Decoder makes Input's lines messages; Limit stops after that many
	// lines. Default 0: every line.
	Decoder Decoder
	Limit   int
	// Generated is the messages without Input.
	Generated Generated
}

// TooLargeError is a Generated payload of Size bytes where the broker
// takes at most Most for a message of its shape (its max_message_size,
// pool.MaxPayload), batched or not.
type TooLargeError struct{ Size, Most int }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("a payload of %d bytes: the broker takes messages of up to %d bytes (its max_message_size), batched or not", e.Size, e.Most)
}

// Open makes the source ready for pool.Producer.Publish to c's broker:
// next hands out the messages; total is how many there are (-1: as many
// as Input has lines); stop ends reading Input and closes it. A fixed
// Generated payload larger than the broker takes is a *TooLargeError
// before anything is sent, so that nothing is half published; an Input
// that does not open is the *os.PathError.
func (s Source) Open(ctx context.Context, c *pool.Client) (next func(context.Context) (pool.Message, bool, error), total int, stop func(), err error) {
	if s.Input == "" {
		if fixed := s.Generated.Fixed(); fixed != nil {
			limit, err := c.MaxMessageSize(ctx)
			if err != nil {
				return nil, 0, nil, err
			}
			if most := pool.MaxPayload(limit, s.Generated.Template); len(fixed) > most {
				return nil, 0, nil, &TooLargeError{Size: len(fixed), Most: most}
			}
		}
		return s.Generated.Messages(), s.Generated.Count, func() {}, nil
	}
	name, r, closeInput := "stdin", s.Stdin, func() error { return nil }
	if r == nil {
		r = os.Stdin
	}
	if s.Input != "-" {
		file, err := os.Open(s.Input)
		if err != nil {
			return nil, 0, nil, err
		}
		name, r, closeInput = s.Input, file, file.Close
	}
	// The reader ends at the end of the input, or once stop is called.
	rctx, cancel := context.WithCancel(ctx)
	dec := s.Decoder
	return dec.Messages(Read(rctx, name, r), s.Limit), -1, func() { cancel(); _ = closeInput() }, nil
}
