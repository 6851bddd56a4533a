package broker

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// The fault API: the admin REST routes that reach Fault, DropConnections,
// RestartBroker and MoveTopic from another process, for fault campaigns
// that run the broker as a process of its own (so that it can also be
// killed). Only with Options.FaultAPI (`streamrun broker --fault-api`);
// never on a broker that serves anything real. Routes, under
// /admin/v2/streamrun/:
//
//	POST   faults                      add a fault: faultRequest as JSON → {"id": N}
//	GET    faults                      the faults in place, with how often each fired
//	DELETE faults/{id}                 remove one
//	POST   brokers/{i}/drop-connections  close broker i's connections (-1: all)
//	POST   brokers/{i}/restart?down=2s   stop broker i, wait down, start it again
type faultAPI struct {
	mu     sync.Mutex
	next   int
	faults map[int]*FaultHandle
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
	Delay   string `json:"delay"`
	Count   int    `json:"count"`
}

func (r faultRequest) fault() (Fault, error) {
	f := Fault{Broker: -1, Topic: r.Topic, Message: r.Message, Drop: r.Drop, Count: r.Count}
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

// faultRoutes adds the fault API to the admin handler through h.
func (c *Cluster) faultRoutes(h func(string, adminFunc)) {
	api := &faultAPI{faults: make(map[int]*FaultHandle)}
	const base = "/admin/v2/streamrun/"
	h("POST "+base+"faults", func(_ http.ResponseWriter, r *http.Request) (any, error) {
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
		fh := c.AddFault(f)
		api.mu.Lock()
		defer api.mu.Unlock()
		api.next++
		api.faults[api.next] = fh
		return map[string]int{"id": api.next}, nil
	})
	h("GET "+base+"faults", func(http.ResponseWriter, *http.Request) (any, error) {
		api.mu.Lock()
		defer api.mu.Unlock()
		out := map[string]int{}
		for id, fh := range api.faults {
			out[strconv.Itoa(id)] = fh.Fired()
		}
		return out, nil
	})
	h("DELETE "+base+"faults/{id}", func(_ http.ResponseWriter, r *http.Request) (any, error) {
		id, _ := strconv.Atoi(r.PathValue("id"))
		api.mu.Lock()
		fh := api.faults[id]
		delete(api.faults, id)
		api.mu.Unlock()
		if fh == nil {
			return nil, herr(http.StatusNotFound, "no fault %q", r.PathValue("id"))
		}
		fh.Remove()
		return nil, nil
	})
	h("POST "+base+"brokers/{i}/drop-connections", func(_ http.ResponseWriter, r *http.Request) (any, error) {
		i, err := strconv.Atoi(r.PathValue("i"))
		if err != nil || i < -1 || i >= c.Brokers() {
			return nil, herr(http.StatusBadRequest, "broker %q: want -1 (all) or 0..%d", r.PathValue("i"), c.Brokers()-1)
		}
		c.DropConnections(i)
		return nil, nil
	})
	h("POST "+base+"brokers/{i}/restart", func(_ http.ResponseWriter, r *http.Request) (any, error) {
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
		return nil, c.restartBroker(r.Context(), i, down)
	})
}
