package control

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/streamrun/streamrun"
	"github.com/streamrun/streamrun/runtime"
)

// apiError is every refusal's body.
type apiError struct {
	// Error says what is wrong.
	Error string `json:"error"`
	// Problems are the file's problems, one FILE:LINE:COL: field: what is
	// wrong each, when a file does not load.
	Problems []string `json:"problems,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string, problems []string) {
	writeJSON(w, status, apiError{Error: msg, Problems: problems})
}

// maxBody bounds a request's body: a pipeline file is at most
// pipelines.MaxFileSize, and JSON quoting may double it.
const maxBody = 4 << 20

// readJSON decodes the request's body into v, answering 400 (or 413, or
// 415) itself when it cannot.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		writeError(w, http.StatusUnsupportedMediaType, fmt.Sprintf("the body is %s: want application/json", ct), nil)
		return false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is over %d bytes", maxBody), nil)
			return false
		}
		if errors.Is(err, io.EOF) {
			err = errors.New("empty body")
		}
		writeError(w, http.StatusBadRequest, "malformed JSON: "+err.Error(), nil)
		return false
	}
	if dec.More() {
		writeError(w, http.StatusBadRequest, "malformed JSON: more than one value in the body", nil)
		return false
	}
	return true
}

// writeChangeError answers a refused change or dry run with the status
// that says why.
func writeChangeError(w http.ResponseWriter, err error) {
	var fe *streamrun.FilesError
	var re *streamrun.RestartError
	switch {
	case errors.As(err, &fe):
		writeError(w, http.StatusUnprocessableEntity, "the file does not load; nothing changed", strings.Split(fe.Error(), "\n"))
	case errors.As(err, &re):
		writeError(w, http.StatusConflict, "refused; nothing changed: "+re.Error(), nil)
	case errors.Is(err, streamrun.ErrNoPipeline), errors.Is(err, streamrun.ErrNotAFile):
		writeError(w, http.StatusNotFound, err.Error(), nil)
	case errors.Is(err, runtime.ErrNotRunning):
		writeError(w, http.StatusServiceUnavailable, err.Error(), nil)
	case errors.Is(err, streamrun.ErrReadOnly):
		writeError(w, http.StatusForbidden, "refused; nothing changed: "+err.Error(), nil)
	default:
		writeError(w, http.StatusConflict, "refused: "+err.Error(), nil)
	}
}
