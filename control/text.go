package control

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// The text forms of the API's answers, as `streamrun ctl` prints them
// (its --output json prints the answers themselves).

// WritePipelines writes ps as a table: a header, then a row a pipeline
// with its state, rates, backlog ("-": not known), counts and the
// instances up of all.
func WritePipelines(w io.Writer, ps []PipelineStatus) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PIPELINE\tSTATE\tIN/S\tACKED/S\tBACKLOG\tIN FLIGHT\tACKED\tDEAD-LETTERED\tINSTANCES UP")
	for _, p := range ps {
		backlog := "-"
		if p.Backlog != nil {
			backlog = fmt.Sprint(*p.Backlog)
		}
		up := 0
		for _, i := range p.Instances {
			if i.Up {
				up++
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f\t%s\t%d\t%d\t%d\t%d/%d\n", p.Name, p.State, p.Rates.Received, p.Rates.Acked, backlog,
			p.Counts.InFlight, p.Counts.Acked, p.Counts.DeadLettered, up, len(p.Instances))
	}
	return tw.Flush()
}

// WriteText writes the plan a line a pipeline ("NAME: ACTION [EFFECTS]:
// FIELD (RELOAD), ..."), a line a setting that takes a restart, and
// "applied" when it was.
func (plan Plan) WriteText(w io.Writer) error {
	var b strings.Builder
	for _, p := range plan.Pipelines {
		var fields []string
		for _, f := range p.Fields {
			fields = append(fields, f.Path+" ("+f.Reload+")")
		}
		if p.Binary {
			fields = append(fields, "the handler's binary")
		}
		b.WriteString(p.Pipeline + ": " + p.Action)
		if len(p.Effects) > 0 {
			b.WriteString(" [" + strings.Join(p.Effects, ", ") + "]")
		}
		if len(fields) > 0 {
			b.WriteString(": " + strings.Join(fields, ", "))
		}
		b.WriteByte('\n')
	}
	for _, r := range plan.Restart {
		fmt.Fprintf(&b, "%s: takes a restart (applying is refused)\n", r.Path)
	}
	if plan.Applied {
		b.WriteString("applied\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteTapLine writes one event of a tap (as Client.Tap hands it) as a
// line: its time, kind, topic, key, trace, outcome and quoted payload,
// "… (N bytes)" after a truncated one.
func WriteTapLine(w io.Writer, e json.RawMessage) error {
	var ev tapEvent
	if err := json.Unmarshal(e, &ev); err != nil {
		return fmt.Errorf("a tap event: %w", err)
	}
	line := fmt.Sprintf("%s %-6s %s", ev.Time.Format("15:04:05.000"), ev.Kind, ev.Topic)
	if ev.Key != "" {
		line += " key=" + ev.Key
	}
	if ev.TraceID != "" {
		line += " trace=" + ev.TraceID
	}
	if ev.Outcome != "" {
		line += " " + ev.Outcome
	}
	payload := fmt.Sprintf("%q", ev.Payload)
	if ev.Truncated {
		payload += fmt.Sprintf("… (%d bytes)", ev.Size)
	}
	_, err := fmt.Fprintln(w, line+" "+payload)
	return err
}
