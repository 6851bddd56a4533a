package broker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"
)

// Limits on what the admin API accepts, so that a hostile or broken client
// gets a clear error and cannot make the broker hold what it sends
// (docs/contract.md §11, docs/admin.md "Limits").
const (
	// maxAdminBody is the largest request body read: Pulsar's admin
	// bodies (a partition count, tenant info, a message id) are a few
	// hundred bytes. Larger ones get 413.
	maxAdminBody = 1 << 20
	// maxNameBytes bounds a tenant, namespace or subscription name.
	maxNameBytes = 255
	// maxTopicNameBytes bounds a full topic name
	// (persistent://tenant/namespace/name).
	maxTopicNameBytes = 1024
)

// limitBody reads the request body whole, up to maxAdminBody, before any
// handler runs: larger bodies are refused with 413 whether or not they
// announced their length, and handlers read what is left from memory.
func limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > maxAdminBody {
			tooLarge(w, r.ContentLength)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAdminBody))
		if err != nil {
			var mb *http.MaxBytesError
			if errors.As(err, &mb) {
				tooLarge(w, -1)
				return
			}
			writeJSON(w, http.StatusBadRequest, map[string]string{"reason": "Cannot read the request body: " + err.Error()})
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

func tooLarge(w http.ResponseWriter, n int64) {
	size := "more"
	if n > 0 {
		size = fmt.Sprintf("%d bytes", n)
	}
	w.Header().Set("Connection", "close") // the rest of the body is not read
	writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{
		"reason": fmt.Sprintf("Request body too large: %s, the limit is %d bytes", size, maxAdminBody)})
}

// checkName refuses a tenant, namespace or subscription name that is
// empty, over-long, a path step ("." or "..") or, for tenants and
// namespaces (strict), has characters other than Pulsar's letters, digits
// and - _ = : . (a subscription name may hold any printable text).
func checkName(what, v string, strict bool) error {
	switch {
	case v == "":
		return herr(http.StatusPreconditionFailed, "Invalid %s name: empty", what)
	case len(v) > maxNameBytes:
		return herr(http.StatusPreconditionFailed, "Invalid %s name: %d bytes, the limit is %d", what, len(v), maxNameBytes)
	case v == "." || v == "..":
		return herr(http.StatusPreconditionFailed, "Invalid %s name %q", what, v)
	case !utf8.ValidString(v):
		return herr(http.StatusPreconditionFailed, "Invalid %s name %q: not UTF-8", what, v)
	}
	for _, r := range v {
		bad := r < 0x20 || r == 0x7f || r == '/'
		if strict {
			bad = !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_=:.", r))
		}
		if bad {
			return herr(http.StatusPreconditionFailed, "Invalid %s name %q: it has %q (allowed: letters, digits, - _ = : .)", what, v, r)
		}
	}
	return nil
}

// checkJSON refuses a body that is not empty and not JSON, saying where.
func checkJSON(what string, body []byte) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return herr(http.StatusBadRequest, "Invalid %s: malformed JSON at byte %d: %v", what, se.Offset, err)
		}
		return herr(http.StatusBadRequest, "Invalid %s: %v", what, err)
	}
	return nil
}

// decodeJSON decodes a non-empty body into v, refusing malformed JSON and
// fields of the wrong type with 400 saying where.
func decodeJSON(what string, body []byte, v any) error {
	if err := checkJSON(what, body); err != nil || len(bytes.TrimSpace(body)) == 0 {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return herr(http.StatusBadRequest, "Invalid %s: field %q must be %s, got %s (byte %d)", what, te.Field, te.Type, te.Value, te.Offset)
		}
		return herr(http.StatusBadRequest, "Invalid %s: %v", what, err)
	}
	return nil
}
