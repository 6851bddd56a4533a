package faults

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// The fault API: the admin REST routes that reach a Set, and the
// cluster's DropConnections and RestartBrokerAfter, from another process,
// for fault campaigns that run the broker as a process of its own (so that
// it can also be killed). Served by a broker whose options went through
// InstallAPI (`streamrun broker --fault-api`, in a build with the faultapi
// tag); never on a broker that serves anything real. Routes, under
// /admin/v2/streamrun/:
//
//	POST   faults                      add a fault: faultRequest as JSON → {"id": N}
//	GET    faults                      the faults in place, with how often each fired
//	DELETE faults/{id}                 remove one
//	POST   brokers/{i}/drop-connections  close broker i's connections (-1: all)
//	POST   brokers/{i}/restart?down=2s   stop broker i, wait down, start it again
type api struct {
	set *Set
	c   *broker.Cluster

	mu     sync.Mutex
	next   int
	faults map[int]*Handle
}

// InstallAPI installs s (Install) and serves it, with the routes above,
// on the admin API of the broker o configures.
func (s *Set) InstallAPI(o *broker.Options) {
	s.Install(o)
	o.AdminRoutes = func(c *broker.Cluster, handle func(string, http.Handler)) {
		a := &api{set: s, c: c, faults: make(map[int]*Handle)}
		a.routes(handle)
	}
}

// httpError is a refusal with its status, answered as Apache Pulsar's
// admin API answers, {"reason": ...}.
type httpError struct {
	code   int
	reason string
}

func (e *httpError) Error() string { return e.reason }

func herr(code int, format string, args ...any) error {
	return &httpError{code, fmt.Sprintf(format, args...)}
}

// route adapts a handler returning a value or an error to http.Handler.
func route(f func(r *http.Request) (any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, err := f(r)
		code := http.StatusOK
		if err != nil {
			code = http.StatusInternalServerError
			var he *httpError
			if errors.As(err, &he) {
				code = he.code
			}
			v = map[string]string{"reason": err.Error()}
		} else if v == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(v)
	})
}

// faultRequest is a Fault in JSON: Command and Err by their protocol
// names ("LOOKUP", "ServiceNotReady"), Delay as a Go duration. Broker
// defaults to -1 (any) when left out.
type faultRequest struct {
	Broker  *int   `json:"broker"`
	Command string `json:"command"`
	Topic   string `json:"topic"`
	Err     string `json:"error"`
	Message string `json:"message"`
	Drop    bool   `json:"drop"`
	// DropAnswer: handled, then the connection dropped before the answer.
	DropAnswer bool   `json:"drop_answer"`
	Delay      string `json:"delay"`
	Count      int    `json:"count"`
}

func (r faultRequest) fault() (Fault, error) {
	f := Fault{Broker: -1, Topic: r.Topic, Message: r.Message, Drop: r.Drop, DropAnswer: r.DropAnswer, Count: r.Count}
	if r.Broker != nil {
		f.Broker = *r.Broker
	}
	if r.Command != "" {
		v, ok := pb.BaseCommand_Type_value[r.Command]
		if !ok {
			return f, herr(http.StatusBadRequest, "command %q: not a command type of the protocol (LOOKUP, SEND, ...)", r.Command)
		}
		f.Command = pb.BaseCommand_Type(v)
	}
	if r.Err != "" {
		v, ok := pb.ServerError_value[r.Err]
		if !ok {
			return f, herr(http.StatusBadRequest, "error %q: not a server error of the protocol (ServiceNotReady, TooManyRequests, ...)", r.Err)
		}
		f.Err = pb.ServerError(v)
	}
	if r.Delay != "" {
		d, err := time.ParseDuration(r.Delay)
		if err != nil || d < 0 {
			return f, herr(http.StatusBadRequest, "delay %q: want a Go duration such as 2s", r.Delay)
		}
		f.Delay = d
	}
	if r.Count < 0 {
		return f, herr(http.StatusBadRequest, "count %d: want 0 (until removed) or more", r.Count)
	}
	return f, nil
}

// routes adds the fault API's routes through handle.
func (a *api) routes(handle func(string, http.Handler)) {
	h := func(pattern string, f func(r *http.Request) (any, error)) { handle(pattern, route(f)) }
	c := a.c
	const base = "/admin/v2/streamrun/"
	h("POST "+base+"faults", func(r *http.Request) (any, error) {
		var req faultRequest
		dec := json.NewDecoder(io.LimitReader(r.Body, 1<<16))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			return nil, herr(http.StatusBadRequest, "fault: bad JSON: %v", err)
		}
		f, err := req.fault()
		if err != nil {
			return nil, err
		}
		fh := a.set.Add(f)
		a.mu.Lock()
		defer a.mu.Unlock()
		a.next++
		a.faults[a.next] = fh
		return map[string]int{"id": a.next}, nil
	})
	h("GET "+base+"faults", func(*http.Request) (any, error) {
		a.mu.Lock()
		defer a.mu.Unlock()
		out := map[string]int{}
		for id, fh := range a.faults {
			out[strconv.Itoa(id)] = fh.Fired()
		}
		return out, nil
	})
	h("DELETE "+base+"faults/{id}", func(r *http.Request) (any, error) {
		id, _ := strconv.Atoi(r.PathValue("id"))
		a.mu.Lock()
		fh := a.faults[id]
		delete(a.faults, id)
		a.mu.Unlock()
		if fh == nil {
			return nil, herr(http.StatusNotFound, "no fault %q", r.PathValue("id"))
		}
		fh.Remove()
		return nil, nil
	})
	h("POST "+base+"brokers/{i}/drop-connections", func(r *http.Request) (any, error) {
		i, err := strconv.Atoi(r.PathValue("i"))
		if err != nil || i < -1 || i >= c.Brokers() {
			return nil, herr(http.StatusBadRequest, "broker %q: want -1 (all) or 0..%d", r.PathValue("i"), c.Brokers()-1)
		}
		c.DropConnections(i)
		return nil, nil
	})
	h("POST "+base+"brokers/{i}/restart", func(r *http.Request) (any, error) {
		i, err := strconv.Atoi(r.PathValue("i"))
		if err != nil || i < 0 || i >= c.Brokers() {
			return nil, herr(http.StatusBadRequest, "broker %q: want 0..%d", r.PathValue("i"), c.Brokers()-1)
		}
		var down time.Duration
		if s := r.URL.Query().Get("down"); s != "" {
			if down, err = time.ParseDuration(s); err != nil || down < 0 || down > time.Minute {
				return nil, herr(http.StatusBadRequest, "down %q: want a Go duration up to 1m", s)
			}
		}
		return nil, c.RestartBrokerAfter(r.Context(), i, down)
	})
}
