package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/streamrun/streamrun/pulsarwire"
)

// A TopicCommand is one subcommand of `streamrun topics` as a value, so
// that Go programs get its argument rules and results too: the command
// parses flags into it, Check says what is wrong with it, RunTopicCommand
// does it and returns both its text and its JSON form.

// TopicCommandNames are the subcommands, in the order `topics` names them.
const TopicCommandNames = "list, create, delete, stats, internal-stats, subscriptions, backlog or reset-cursor"

// TopicCommand is a subcommand with its arguments and the values of the
// flags that belong to it; the zero value of each flag is its default.
type TopicCommand struct {
	Name         string   // list, create, delete, stats, internal-stats, subscriptions, backlog or reset-cursor
	Args         []string // list: at most one TENANT/NAMESPACE (default public/default); the others: one topic
	Partitions   int      // create: how many (0: not partitioned)
	Force        bool     // delete: even with producers or consumers connected
	Subscription string   // reset-cursor: which subscription (required)
	To           string   // reset-cursor: where to (required; ParseResetTarget's forms)
}

// CheckTopicCommandName refuses an empty or unknown subcommand name.
func CheckTopicCommandName(name string) error {
	switch name {
	case "":
		return errors.New("give a subcommand: " + TopicCommandNames)
	case "list", "create", "delete", "stats", "internal-stats", "subscriptions", "backlog", "reset-cursor":
		return nil
	}
	return fmt.Errorf("unknown subcommand %q", name)
}

// Check refuses a command that would not do what it says: an unknown
// name, the wrong number of arguments, a namespace or topic that does
// not parse, negative partitions, a reset without its subscription or
// with a target that does not parse.
func (c TopicCommand) Check() error {
	if err := CheckTopicCommandName(c.Name); err != nil {
		return err
	}
	if c.Name == "list" {
		switch {
		case len(c.Args) > 1:
			return fmt.Errorf("list takes one namespace, got %s", strings.Join(c.Args, " "))
		case len(c.Args) == 1 && strings.Count(c.Args[0], "/") != 1:
			return fmt.Errorf("list %q: want TENANT/NAMESPACE, e.g. public/default", c.Args[0])
		}
		return nil
	}
	if len(c.Args) != 1 {
		return fmt.Errorf("%s takes one TOPIC, got %d arguments", c.Name, len(c.Args))
	}
	if _, err := pulsarwire.ParseTopic(c.Args[0]); err != nil {
		return err
	}
	switch {
	case c.Name == "create" && c.Partitions < 0:
		return fmt.Errorf("--partitions must not be negative, got %d", c.Partitions)
	case c.Name != "reset-cursor":
		return nil
	case c.Subscription == "":
		return errors.New("reset-cursor needs --subscription")
	case c.To == "":
		return errors.New("reset-cursor needs --to earliest, latest, TIME or ID")
	}
	if _, err := ParseResetTarget(c.To, time.Now()); err != nil {
		return fmt.Errorf("--to %w", err)
	}
	return nil
}

// TopicResult is what a TopicCommand did, in its two forms.
type TopicResult struct {
	text  func(io.Writer) error
	value any    // the JSON form, unless raw is set
	raw   []byte // the server's own JSON answer (stats, internal-stats)
}

// WriteText writes the result for people: a line a topic or
// subscription for the lists, a sentence for a change, the text forms of
// text.go for stats and backlogs.
func (r *TopicResult) WriteText(w io.Writer) error { return r.text(w) }

// WriteJSON writes the result as indented JSON: the server's answer
// itself for stats and internal-stats.
func (r *TopicResult) WriteJSON(w io.Writer) error {
	if r.raw != nil {
		var out bytes.Buffer
		if err := json.Indent(&out, r.raw, "", "  "); err != nil {
			return err
		}
		out.WriteByte('\n')
		_, err := w.Write(out.Bytes())
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r.value)
}

// RunTopicCommand checks c and does it; errors say which topic.
func (c *Client) RunTopicCommand(ctx context.Context, cmd TopicCommand) (*TopicResult, error) {
	if err := cmd.Check(); err != nil {
		return nil, err
	}
	if cmd.Name == "list" {
		ns := "public/default"
		if len(cmd.Args) == 1 {
			ns = cmd.Args[0]
		}
		list, err := c.Topics(ctx, ns)
		if err != nil {
			return nil, err
		}
		return lines(list), nil
	}
	tp, _ := pulsarwire.ParseTopic(cmd.Args[0]) // checked
	t := tp.String()
	switch cmd.Name {
	case "create":
		if err := c.CreateTopic(ctx, t, cmd.Partitions); err != nil {
			return nil, fmt.Errorf("create %s: %w", t, err)
		}
		text := "created " + t
		if cmd.Partitions > 0 {
			text += " with " + plural(int64(cmd.Partitions), "partition")
		}
		return sentence(text, map[string]any{"created": t, "partitions": cmd.Partitions}), nil
	case "delete":
		n, err := c.DeleteTopic(ctx, t, cmd.Force)
		if err != nil {
			return nil, fmt.Errorf("delete %s: %w", t, err)
		}
		return sentence("deleted "+t, map[string]any{"deleted": t, "partitions": n}), nil
	case "stats", "backlog":
		st, err := c.TopicStats(ctx, t)
		if err != nil {
			return nil, fmt.Errorf("%s of %s: %w", cmd.Name, t, err)
		}
		if cmd.Name == "backlog" {
			rows := st.Backlogs()
			return &TopicResult{text: func(w io.Writer) error { return WriteBacklogs(w, rows) }, value: rows}, nil
		}
		return &TopicResult{text: func(w io.Writer) error { return st.WriteText(w, t) }, raw: st.Raw}, nil
	case "internal-stats":
		st, err := c.InternalStats(ctx, t)
		if err != nil {
			return nil, fmt.Errorf("internal stats of %s: %w", t, err)
		}
		return &TopicResult{text: func(w io.Writer) error { return st.WriteText(w, t) }, raw: st.Raw}, nil
	case "subscriptions":
		subs, err := c.Subscriptions(ctx, t)
		if err != nil {
			return nil, fmt.Errorf("subscriptions of %s: %w", t, err)
		}
		return lines(subs), nil
	}
	// reset-cursor, the last name Check lets through.
	to, _ := ParseResetTarget(cmd.To, time.Now()) // checked
	if err := c.ResetCursor(ctx, t, cmd.Subscription, to); err != nil {
		return nil, fmt.Errorf("reset %s on %s: %w", cmd.Subscription, t, err)
	}
	return sentence(fmt.Sprintf("reset %s on %s to %s", cmd.Subscription, t, cmd.To),
		map[string]any{"topic": t, "subscription": cmd.Subscription, "to": cmd.To}), nil
}

// lines is a list result: a line an item, a JSON array.
func lines(list []string) *TopicResult {
	return &TopicResult{value: list, text: func(w io.Writer) error {
		for _, s := range list {
			if _, err := fmt.Fprintln(w, s); err != nil {
				return err
			}
		}
		return nil
	}}
}

// sentence is a change's result: one line, a JSON object.
func sentence(text string, v any) *TopicResult {
	return &TopicResult{value: v, text: func(w io.Writer) error {
		_, err := fmt.Fprintln(w, text)
		return err
	}}
}
