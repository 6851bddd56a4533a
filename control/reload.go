package control

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/streamrun/streamrun"
)

// fileView is one of the run's files.
type fileView struct {
	Path    string `json:"path"`
	Content string `json:"content"`
	// Writable: a change through the API can be written to it.
	Writable bool `json:"writable"`
}

func (s *Server) listFiles(w http.ResponseWriter, r *http.Request) {
	out := []fileView{}
	for _, path := range s.run.Files().Paths() {
		b, err := os.ReadFile(path)
		if err != nil {
			writeError(w, http.StatusInternalServerError, "read "+path+": "+err.Error(), nil)
			return
		}
		fi, err := os.Stat(path)
		writable := err == nil && fi.Mode().Perm()&0o200 != 0 && !s.opts.ReadOnly
		out = append(out, fileView{Path: path, Content: string(b), Writable: writable})
	}
	writeJSON(w, http.StatusOK, map[string]any{"files": out})
}

// reloadRequest is a new version of one of the run's files.
type reloadRequest struct {
	// File is its path as the run names it; may be left out when the
	// run has one file.
	File    string  `json:"file"`
	Content *string `json:"content"`
}

// Plan is what a reload does (or would do): POST /reload and
// /reload/dry-run, Client.Reload.
type Plan struct {
	File string `json:"file"`
	// Applied: the reload was applied (false for a dry run).
	Applied   bool             `json:"applied"`
	Pipelines []PipelineChange `json:"pipelines"`
	// Restart lists the settings outside the pipelines that differ: a
	// reload with any is refused, they take a restart.
	Restart []FieldChange `json:"restart"`
}

// PipelineChange is what a reload does to one pipeline.
type PipelineChange struct {
	Pipeline string `json:"pipeline"`
	// Action is unchanged, changed, added or removed.
	Action string `json:"action"`
	// Effects are the change classes (docs/reload.md) a changed pipeline
	// goes through: handler (rolled out one instance at a time), flow
	// (drained, then on with the new settings), source (drained,
	// subscribed anew).
	Effects []string      `json:"effects"`
	Fields  []FieldChange `json:"fields"`
	// Binary: the handler's program changed though no field did.
	Binary bool `json:"binary"`
}

// FieldChange is a field a reload changes and its reload effect
// (docs/reload.md).
type FieldChange struct {
	Path   string `json:"path"`
	Reload string `json:"reload"`
}

func viewOf(file string, applied bool, p *streamrun.ReloadPlan) Plan {
	v := Plan{File: file, Applied: applied, Pipelines: []PipelineChange{}, Restart: []FieldChange{}}
	if p == nil {
		return v
	}
	for _, c := range p.Pipelines {
		cv := PipelineChange{Pipeline: c.Pipeline, Action: string(c.Action), Effects: []string{}, Fields: []FieldChange{}, Binary: c.Binary}
		for _, e := range c.Effects {
			cv.Effects = append(cv.Effects, string(e))
		}
		for _, f := range c.Fields {
			cv.Fields = append(cv.Fields, FieldChange{Path: f.Path, Reload: string(f.Reload)})
		}
		v.Pipelines = append(v.Pipelines, cv)
	}
	for _, f := range p.Restart {
		v.Restart = append(v.Restart, FieldChange{Path: f.Path, Reload: string(f.Reload)})
	}
	return v
}

// request reads a reloadRequest, answering the refusals itself.
func (s *Server) request(w http.ResponseWriter, r *http.Request) (reloadRequest, bool) {
	var req reloadRequest
	if !readJSON(w, r, &req) {
		return req, false
	}
	if req.Content == nil {
		writeError(w, http.StatusBadRequest, "content: missing: the new version of the file", nil)
		return req, false
	}
	paths := s.run.Files().Paths()
	if req.File == "" {
		if len(paths) != 1 {
			writeError(w, http.StatusBadRequest, "file: not given, and the run has more than one", nil)
			return req, false
		}
		req.File = paths[0]
	}
	if !slices.Contains(paths, req.File) {
		// The same file named otherwise (relative to another directory).
		abs, err := filepath.Abs(req.File)
		found := false
		for _, p := range paths {
			if pa, perr := filepath.Abs(p); err == nil && perr == nil && pa == abs {
				req.File, found = p, true
				break
			}
		}
		if !found {
			writeError(w, http.StatusNotFound, "file: "+quote(req.File)+" is not one of the run's files", nil)
			return req, false
		}
	}
	return req, true
}

func (s *Server) dryRun(w http.ResponseWriter, r *http.Request) {
	req, ok := s.request(w, r)
	if !ok {
		return
	}
	plan, err := s.run.DryRun(r.Context(), req.File, []byte(*req.Content))
	if err != nil {
		writeChangeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, viewOf(req.File, false, plan))
}

func (s *Server) apply(w http.ResponseWriter, r *http.Request) {
	req, ok := s.request(w, r)
	if !ok {
		return
	}
	ctx, cancel := changeContext(r)
	defer cancel()
	plan, err := s.run.Apply(ctx, req.File, []byte(*req.Content))
	if err != nil {
		writeChangeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, viewOf(req.File, true, plan))
}

// changeTimeout bounds a change's building and starting.
const changeTimeout = 5 * time.Minute

// changeContext is the context of a change: not ended by a client that
// goes away mid-change (a reload half done because a browser tab closed
// helps no one), bounded by changeTimeout.
func changeContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(r.Context()), changeTimeout)
}
