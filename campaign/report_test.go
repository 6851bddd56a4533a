package campaign_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// report is what a campaign run found, printed as tables and written as
// JSON and markdown.
type report struct {
	Target        string         `json:"target"`
	Started       time.Time      `json:"started"`
	Duration      string         `json:"duration"`
	RatePerPipe   int            `json:"rate_per_pipeline"`
	LoadAvg       string         `json:"loadavg_at_end"`
	Conditions    string         `json:"conditions"`
	Pipelines     []pipeCounts   `json:"pipelines"`
	Kinds         []kindSummary  `json:"faults"`
	PipeNames     []string       `json:"-"`
	DupsNoFault   int            `json:"duplicates_before_any_fault"`
	Takeovers     int            `json:"exclusive_takeovers"`
	TakeoverTime  string         `json:"exclusive_takeover_median_max,omitempty"`
	DupBound      int            `json:"duplicate_bound"`
	PeakHostRSS   int64          `json:"peak_host_rss_bytes"`
	PeakBrokerRSS int64          `json:"peak_broker_rss_bytes"`
	SelfExits     []string       `json:"processes_that_exited_by_themselves,omitempty"`
	Notes         []string       `json:"collector_notes,omitempty"`
	Unknown       []string       `json:"unknown_outputs,omitempty"`
	Counts        []countCheck   `json:"counting_pipelines,omitempty"`
	Windows       []windowCheck  `json:"window_pipelines,omitempty"`
	Records       []faultRecord  `json:"fault_log"`
	Totals        map[string]int `json:"totals"`
}

type kindSummary struct {
	Kind string `json:"kind"`
	// ByPipeline is "median / max" of each pipeline's own recovery.
	ByPipeline     map[string]string `json:"recovery_by_pipeline"`
	Injected       int               `json:"injected"`
	NotRecovered   int               `json:"not_recovered"`
	Duplicates     int               `json:"duplicates_after"`
	RecoveryMedian string            `json:"recovery_median"`
	RecoveryMax    string            `json:"recovery_max"`
}

// dupBound is how many duplicates one fault may cause at most: what the
// broker may have delivered and not yet seen acknowledged — per host and
// pipeline, its in-flight limit plus the receiver queue of each partition —
// and, for a fault that stops the broker, the acknowledgements of two
// seconds it may not have saved yet (the cursor is saved every second).
func (e *env) dupBound(k faultKind) int {
	n := 0
	for _, p := range e.pipes {
		n += len(e.hosts) * (maxInFlight + receiverQueue*max(p.partitions, 1))
	}
	if k.ackWindow {
		n += 2 * e.rate * len(e.pipes)
	}
	return n
}

func (e *env) report(target string, took time.Duration, recs []faultRecord) report {
	r := report{Target: target, Duration: took.Round(time.Second).String(), RatePerPipe: e.rate, Records: recs,
		PeakHostRSS: e.peakHost.Load(), PeakBrokerRSS: e.peakBroker.Load(), Totals: map[string]int{}, Started: time.Now().Add(-took).UTC()}
	r.Conditions = fmt.Sprintf("%d hosts (`streamrun run`), %d pipelines of the chaos handler × 2 instances, batches of 50, "+
		"batch timeout %s, receiver queue %d, operation retry delay %s; slow consumer %s at %s a message with a burst of %d × %d B per pipeline; "+
		"ServiceNotReady, TooManyRequests and a broker down last %s; %d CPUs",
		len(e.hosts), len(e.pipes), batchTimeout, receiverQueue, retryDelay, e.slowFor, slowSleep, e.burst, burstSize, e.answerFor, goruntime.NumCPU())
	switch {
	case target == "embedded":
		r.Conditions += "; broker: `streamrun broker --data --brokers 3 --fault-api` (no --sync)"
	case e.standalone != nil:
		r.Conditions += fmt.Sprintf("; broker: Apache Pulsar standalone %q of its own, transactions on, killed -9 and restarted on its data (`scripts/pulsar restart`)", e.standalone.name)
	default:
		r.Conditions += "; broker: Apache Pulsar standalone, shared with other tests"
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		r.LoadAvg = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	for _, p := range e.pipes {
		r.PipeNames = append(r.PipeNames, p.name)
		c := p.counts()
		r.Pipelines = append(r.Pipelines, c)
		r.Totals["published"] += c.Published
		r.Totals["receipted"] += c.Receipted
		r.Totals["processed"] += int(c.Processed)
		r.Totals["output"] += c.Output
		r.Totals["duplicated"] += int(c.Duplicated)
		r.Totals["input_copies"] += int(c.InputCopies)
		r.Totals["lost"] += c.Lost
		p.mu.Lock()
		r.Unknown = append(r.Unknown, p.unknown...)
		p.mu.Unlock()
	}
	// Each duplicate is put down to the last fault injected before it
	// arrived.
	dups := map[string]int{}
	for _, p := range e.pipes {
		p.mu.Lock()
		for _, at := range p.dupAt {
			i := sort.Search(len(recs), func(i int) bool { return recs[i].At.After(at) }) - 1
			if i < 0 {
				r.DupsNoFault++
				continue
			}
			dups[recs[i].Kind]++
		}
		p.mu.Unlock()
	}
	byKind := map[string][]faultRecord{}
	for _, rec := range recs {
		byKind[rec.Kind] = append(byKind[rec.Kind], rec)
	}
	for _, k := range e.kinds {
		rs := byKind[k.name]
		r.DupBound += len(rs) * e.dupBound(k)
		s := kindSummary{Kind: k.name, Injected: len(rs), Duplicates: dups[k.name]}
		var ds []time.Duration
		for _, rec := range rs {
			if !rec.Recovered {
				s.NotRecovered++
			}
			ds = append(ds, rec.Recovery)
		}
		s.RecoveryMedian, s.RecoveryMax = medianMax(ds)
		s.ByPipeline = map[string]string{}
		for _, p := range e.pipes {
			var pd []time.Duration
			for _, rec := range rs {
				if d, ok := rec.ByPipeline[p.name]; ok {
					pd = append(pd, d)
				}
			}
			if med, mx := medianMax(pd); med != "" {
				s.ByPipeline[p.name] = med + " / " + mx
			}
		}
		r.Kinds = append(r.Kinds, s)
	}
	// Kills of the host that held the Exclusive subscription: the waiting
	// consumer on the other host took over within the exclusive
	// pipeline's recovery.
	var takeovers []time.Duration
	for _, rec := range recs {
		_, name, held := strings.Cut(rec.Detail, "held the Exclusive subscription of ")
		if d, ok := rec.ByPipeline[strings.TrimSuffix(name, ")")]; ok && held {
			takeovers = append(takeovers, d)
		}
	}
	r.Takeovers = len(takeovers)
	if med, mx := medianMax(takeovers); med != "" {
		r.TakeoverTime = med + " / " + mx
	}
	hosts := e.hosts
	if e.broker != nil {
		hosts = append(hosts[:len(hosts):len(hosts)], e.broker)
	}
	for _, h := range hosts {
		r.SelfExits = append(r.SelfExits, h.exitsByItself()...)
	}
	r.Counts = e.counts
	r.Windows = e.windows
	e.errMu.Lock()
	r.Notes = append(r.Notes, e.errs...)
	e.errMu.Unlock()
	return r
}

// Memory bounds: a host holds at most its in-flight messages per
// pipeline, a broker its caches; these are far above what either needs
// and catch growth without bound.
const (
	hostRSSLimit   = 1 << 30
	brokerRSSLimit = 2 << 30
)

// checkAndWrite prints and writes the report and fails t on what the
// ledger forbids.
func (e *env) checkAndWrite(t *testing.T, r report, target string) {
	md := r.markdown()
	t.Log("\n" + md)
	base := os.Getenv(reportEnv)
	if base == "" {
		base = filepath.Join(e.dir, "report")
	}
	if target != "embedded" {
		base += "-" + target
	}
	js, _ := json.MarshalIndent(r, "", "  ")
	if err := os.WriteFile(base+".json", js, 0o644); err != nil {
		t.Errorf("write report: %v", err)
	}
	if err := os.WriteFile(base+".md", []byte(md), 0o644); err != nil {
		t.Errorf("write report: %v", err)
	}
	t.Logf("campaign report: %s.json, %s.md; process logs in %s", base, base, e.dir)
	for _, c := range r.Pipelines {
		if c.Lost != 0 {
			t.Errorf("pipeline %s lost %d receipted messages", c.Pipeline, c.Lost)
		}
		if c.Guarantee == "exactly_once" && c.Duplicated != 0 {
			t.Errorf("pipeline %s is exactly_once and put out %d duplicates", c.Pipeline, c.Duplicated)
		}
		if c.Receipted == 0 {
			t.Errorf("pipeline %s: no message receipted", c.Pipeline)
		}
	}
	for _, c := range r.Counts {
		if c.Err != "" {
			t.Errorf("pipeline %s: read its changelog: %s", c.Pipeline, c.Err)
		}
		if c.wrong() != 0 {
			t.Errorf("pipeline %s: counts wrong: %d keys in the changelog, %d in the outputs, such as %v", c.Pipeline, c.ChangelogWrong, c.OutputsWrong, c.Examples)
		}
		if c.Keys == 0 {
			t.Errorf("pipeline %s: no key counted", c.Pipeline)
		}
	}
	for _, c := range r.Windows {
		if c.Err != "" {
			t.Errorf("pipeline %s: %s", c.Pipeline, c.Err)
		}
		if c.wrong() != 0 {
			t.Errorf("pipeline %s: windows wrong: %d windows, %d late messages, %d inputs lost, %d counted twice, %d fires twice, such as %v",
				c.Pipeline, c.WindowsWrong, c.LateWrong, c.Lost, c.Twice, c.FiresTwice, c.Examples)
		}
		if c.Windows == 0 {
			t.Errorf("pipeline %s: no window", c.Pipeline)
		}
	}
	if len(r.Unknown) > 0 {
		t.Errorf("outputs that no one published: %v", r.Unknown)
	}
	if r.DupsNoFault > 0 {
		t.Errorf("%d duplicates before any fault", r.DupsNoFault)
	}
	if d := r.Totals["duplicated"]; d > r.DupBound {
		t.Errorf("%d duplicates, more than the %d the faults had in flight", d, r.DupBound)
	}
	if len(r.SelfExits) > 0 {
		t.Errorf("processes that exited by themselves: %v", r.SelfExits)
	}
	if r.PeakHostRSS > hostRSSLimit || (target == "embedded" && r.PeakBrokerRSS > brokerRSSLimit) {
		t.Errorf("memory: peak host RSS %d MiB (limit %d), broker %d MiB (limit %d)",
			r.PeakHostRSS>>20, hostRSSLimit>>20, r.PeakBrokerRSS>>20, brokerRSSLimit>>20)
	}
}

func (r report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "### Campaign on %s: %s, %d messages/s per pipeline, load average %s at the end\n\n", r.Target, r.Duration, r.RatePerPipe, r.LoadAvg)
	fmt.Fprintf(&b, "Conditions: %s.\n\n", r.Conditions)
	b.WriteString("| pipeline | type | guarantee | partitions | published | receipted | processed | output | duplicated | lost |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range r.Pipelines {
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %d | %d | %d | %d | %d | %d |\n", c.Pipeline, c.Type, c.Guarantee, c.Partitions, c.Published, c.Receipted, c.Processed, c.Output, c.Duplicated, c.Lost)
	}
	fmt.Fprintf(&b, "| **all** | | | | %d | %d | %d | %d | %d | %d |\n\n", r.Totals["published"], r.Totals["receipted"], r.Totals["processed"], r.Totals["output"], r.Totals["duplicated"], r.Totals["lost"])
	if n := r.Totals["input_copies"]; n > 0 {
		fmt.Fprintf(&b, "Publishes the broker stored twice (receipt lost, sent again), each copy put out once, not counted as duplicated: %d.\n\n", n)
	}
	b.WriteString("| fault | injected | not recovered | duplicates after | recovery median | recovery max |\n|---|---|---|---|---|---|\n")
	n := 0
	for _, k := range r.Kinds {
		n += k.Injected
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %s | %s |\n", k.Kind, k.Injected, k.NotRecovered, k.Duplicates, k.RecoveryMedian, k.RecoveryMax)
	}
	fmt.Fprintf(&b, "| **all** | %d | | %d | | |\n\n", n, r.Totals["duplicated"]-r.DupsNoFault)
	b.WriteString("Recovery by pipeline, median / max:\n\n| fault |")
	for _, p := range r.PipeNames {
		fmt.Fprintf(&b, " %s |", p)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(r.PipeNames)) + "\n")
	for _, k := range r.Kinds {
		fmt.Fprintf(&b, "| %s |", k.Kind)
		for _, p := range r.PipeNames {
			fmt.Fprintf(&b, " %s |", k.ByPipeline[p])
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "Exclusive takeovers (kill -9 of the host holding the subscription; the other host's waiting consumer took over): %d, the pipeline recovered in %s (median / max).\n\n", r.Takeovers, r.TakeoverTime)
	if len(r.Counts) > 0 {
		b.WriteString("Counting pipelines (keyed state, exactly_once; each key's count read back from the changelog as a starting host reads it, and the counts its outputs carried, against the key's messages):\n\n" +
			"| pipeline | messages | keys | counts wrong in the changelog | in the outputs |\n|---|---|---|---|---|\n")
		for _, c := range r.Counts {
			fmt.Fprintf(&b, "| %s | %d | %d | %d | %d |\n", c.Pipeline, c.Messages, c.Keys, c.ChangelogWrong, c.OutputsWrong)
		}
		for _, c := range r.Counts {
			for _, x := range c.Examples {
				fmt.Fprintf(&b, "\n- %s: %s", c.Pipeline, x)
			}
			if c.Err != "" {
				fmt.Fprintf(&b, "\n- %s: %s", c.Pipeline, c.Err)
			}
		}
		b.WriteString("\n\n")
	}
	if len(r.Windows) > 0 {
		b.WriteString("Window pipelines (tumbling windows of event time, incremental, exactly_once; each window's last fire against the reference computed from the inputs the broker stored, in its order):\n\n" +
			"| pipeline | inputs | windows | fired again | late | windows wrong | late wrong | lost | counted twice | fires twice |\n|---|---|---|---|---|---|---|---|---|---|\n")
		for _, c := range r.Windows {
			fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %d | %d | %d |\n", c.Pipeline, c.Inputs, c.Windows, c.Refired, c.Late, c.WindowsWrong, c.LateWrong, c.Lost, c.Twice, c.FiresTwice)
		}
		for _, c := range r.Windows {
			for _, x := range c.Examples {
				fmt.Fprintf(&b, "\n- %s: %s", c.Pipeline, x)
			}
			if c.Err != "" {
				fmt.Fprintf(&b, "\n- %s: %s", c.Pipeline, c.Err)
			}
		}
		b.WriteString("\n\n")
	}
	broker := "broker"
	if r.Target == "pulsar" {
		broker = "Apache Pulsar standalone's JVM (shared with the other tests, heap sized at its start)"
	}
	fmt.Fprintf(&b, "Peak RSS: host %.0f MiB, %s %s. Duplicates allowed by what was in flight at the faults: %d; before any fault: %d.\n",
		float64(r.PeakHostRSS)/(1<<20), broker, mib(r.PeakBrokerRSS), r.DupBound, r.DupsNoFault)
	return b.String()
}

// medianMax formats the median and the maximum of ds ("" when empty).
func medianMax(ds []time.Duration) (string, string) {
	if len(ds) == 0 {
		return "", ""
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	med := ds[len(ds)/2]
	if len(ds)%2 == 0 {
		med = (ds[len(ds)/2-1] + med) / 2
	}
	return med.Round(time.Millisecond).String(), ds[len(ds)-1].Round(time.Millisecond).String()
}

func mib(v int64) string {
	if v == 0 {
		return "not measured"
	}
	return fmt.Sprintf("%.0f MiB", float64(v)/(1<<20))
}
