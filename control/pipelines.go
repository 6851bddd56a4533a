package control

import (
	"encoding/json"
	"net/http"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/streamrun/streamrun"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/runtime"
)

// PipelineStatus is a pipeline as the API shows it (GET /pipelines,
// Client.Pipelines).
type PipelineStatus struct {
	Name string `json:"name"`
	// File is the file it comes from.
	File string `json:"file"`
	// State is runtime.State: starting, healthy, degraded, paused,
	// reloading, stopping, stopped, failed.
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	Paused bool   `json:"paused"`
	Tap    bool   `json:"tap"`
	// Config is the pipeline as its file says, defaults filled in,
	// durations written as in a file ("10ms").
	Config map[string]any `json:"config"`
	// Inputs are its source's topics, or its pattern.
	Inputs  []string `json:"inputs"`
	Outputs []string `json:"outputs"`
	// DeadLetterTopic is "" for the default, <topic>-<subscription>-DLQ.
	DeadLetterTopic   string             `json:"dead_letter_topic"`
	Instances         []InstanceStatus   `json:"instances"`
	Counts            Counts             `json:"counts"`
	Rates             Rates              `json:"rates"`
	Backlog           *int64             `json:"backlog"`
	DeadLetterReasons []DeadLetterReason `json:"dead_letter_reasons"`
}

// InstanceStatus is one handler instance of a pipeline.
type InstanceStatus struct {
	Instance      int        `json:"instance"`
	Up            bool       `json:"up"`
	Pid           int        `json:"pid"`
	Since         *time.Time `json:"since,omitempty"`
	Batches       int64      `json:"batches"`
	Restarts      int        `json:"restarts"`
	Swaps         int        `json:"swaps"`
	CrashesInARow int        `json:"crashes_in_a_row"`
	LastError     string     `json:"last_error,omitempty"`
	LastCrash     *time.Time `json:"last_crash,omitempty"`
}

// Counts are a pipeline's message counts since the run started.
type Counts struct {
	Received     int64 `json:"received"`
	Processed    int64 `json:"processed"`
	Acked        int64 `json:"acked"`
	Retried      int64 `json:"retried"`
	DeadLettered int64 `json:"dead_lettered"`
	Dropped      int64 `json:"dropped"`
	Filtered     int64 `json:"filtered"`
	HandedBack   int64 `json:"handed_back"`
	InFlight     int64 `json:"in_flight"`
	Crashes      int64 `json:"crashes"`
	Restarts     int64 `json:"restarts"`
}

// DeadLetterReason is why messages were dead-lettered: how many, the
// last when.
type DeadLetterReason struct {
	Reason string    `json:"reason"`
	Count  int64     `json:"count"`
	Last   time.Time `json:"last"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// views are the run's pipelines now, by name.
func (s *Server) views() []PipelineStatus {
	h := s.run.Host()
	files := s.run.Files()
	health := map[string]runtime.PipelineHealth{}
	for _, ph := range h.Health() {
		health[ph.Pipeline] = ph
	}
	stats := map[string]runtime.Stats{}
	for _, st := range h.Stats() {
		stats[st.Pipeline] = st
	}
	var out []PipelineStatus
	for _, p := range files.Pipelines() {
		out = append(out, s.view(p.WithDefaults(), files, health[p.Name], stats[p.Name]))
	}
	return out
}

func (s *Server) view(p pipelines.Pipeline, files *streamrun.Files, ph runtime.PipelineHealth, st runtime.Stats) PipelineStatus {
	v := PipelineStatus{
		Name: p.Name, File: files.FileOf(p.Name), State: string(ph.State), Reason: ph.Reason,
		Paused: p.Paused, Tap: p.Tap, Config: configOf(p), Outputs: p.Outputs,
		DeadLetterTopic: p.ErrorPolicy.DeadLetterTopic,
		Instances:       []InstanceStatus{}, DeadLetterReasons: []DeadLetterReason{},
		Counts: Counts{Received: st.Received, Processed: st.Processed, Acked: st.Acked, Retried: st.Retried,
			DeadLettered: st.DeadLettered, Dropped: st.Dropped, Filtered: st.Filtered, HandedBack: st.HandedBack,
			InFlight: st.InFlight, Crashes: st.Crashes, Restarts: st.Restarts},
	}
	if v.State == "" {
		v.State = string(runtime.StateStarting) // in the files, not in the host yet
	}
	v.Inputs = p.Source.Topics
	if p.Source.Pattern != "" {
		v.Inputs = []string{p.Source.Pattern}
	}
	if v.Outputs == nil {
		v.Outputs = []string{}
	}
	for _, ih := range ph.Instances {
		v.Instances = append(v.Instances, InstanceStatus{Instance: ih.Instance, Up: ih.Up, Pid: ih.Pid, Since: timePtr(ih.Since),
			Batches: ih.Batches, Restarts: ih.Restarts, Swaps: ih.Swaps, CrashesInARow: ih.CrashesInARow,
			LastError: ih.LastError, LastCrash: timePtr(ih.LastCrash)})
	}
	for _, r := range st.DeadLetterReasons {
		v.DeadLetterReasons = append(v.DeadLetterReasons, DeadLetterReason{Reason: r.Reason, Count: r.Count, Last: r.Last})
	}
	rv, bl, ok := s.rates.of(p.Name)
	v.Rates = rv
	if ok {
		v.Backlog = &bl
	}
	return v
}

// configOf is p as the JSON of its YAML, so that durations read as in
// a file.
func configOf(p pipelines.Pipeline) map[string]any {
	b, err := yaml.Marshal(p)
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		return map[string]any{"error": err.Error()}
	}
	// JSON takes no map[any]any: yaml.v3 makes map[string]any for
	// string keys, which a pipeline's are.
	if _, err := json.Marshal(m); err != nil {
		return map[string]any{"error": err.Error()}
	}
	return m
}

func (s *Server) listPipelines(w http.ResponseWriter, r *http.Request) {
	vs := s.views()
	if vs == nil {
		vs = []PipelineStatus{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"pipelines": vs})
}

// named is the view of the pipeline the path names, or a 404 answered.
func (s *Server) named(w http.ResponseWriter, r *http.Request) (PipelineStatus, bool) {
	name := r.PathValue("name")
	for _, v := range s.views() {
		if v.Name == name {
			return v, true
		}
	}
	writeError(w, http.StatusNotFound, "no pipeline named "+quote(name), nil)
	return PipelineStatus{}, false
}

func (s *Server) getPipeline(w http.ResponseWriter, r *http.Request) {
	if v, ok := s.named(w, r); ok {
		writeJSON(w, http.StatusOK, v)
	}
}

func (s *Server) pause(w http.ResponseWriter, r *http.Request)  { s.setPaused(w, r, true) }
func (s *Server) resume(w http.ResponseWriter, r *http.Request) { s.setPaused(w, r, false) }

// setPaused pauses or resumes the pipeline through its file, and answers
// with the pipeline as it is then.
func (s *Server) setPaused(w http.ResponseWriter, r *http.Request, paused bool) {
	if _, ok := s.named(w, r); !ok {
		return
	}
	name := r.PathValue("name")
	ctx, cancel := changeContext(r)
	defer cancel()
	if err := s.run.SetPaused(ctx, name, paused); err != nil {
		writeChangeError(w, err)
		return
	}
	v, ok := s.named(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
