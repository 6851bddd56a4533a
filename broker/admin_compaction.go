package broker

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// The compaction endpoints of Apache Pulsar's admin API (pulsar-admin
// topics compact and compaction-status): a trigger, and the state of the
// last run (topic_compaction.go).

// compactionStatusJSON is Apache Pulsar's LongRunningProcessStatus.
type compactionStatusJSON struct {
	Status    string `json:"status"`
	LastError string `json:"lastError"`
}

// adminCompact starts compacting a topic: 204 at once, 409 while a
// compaction of it runs, as Apache Pulsar.
func (c adminAPI) adminCompact(_ http.ResponseWriter, r *http.Request) (any, error) {
	tp, err := c.adminTopic(r)
	if err != nil {
		return nil, err
	}
	if err := tp.startCompaction(); errors.Is(err, errCompactionRunning) {
		return nil, herr(http.StatusConflict, "Compaction already in progress")
	}
	return nil, nil
}

// adminCompactionStatus says how the topic's last compaction went:
// NOT_RUN, RUNNING, SUCCESS or ERROR with its error.
func (c adminAPI) adminCompactionStatus(_ http.ResponseWriter, r *http.Request) (any, error) {
	tp, err := c.adminTopic(r)
	if err != nil {
		return nil, err
	}
	st, lastErr := tp.compactionStatus()
	return compactionStatusJSON{Status: st, LastError: lastErr}, nil
}

// compactionThresholdKey keeps a namespace's compactionThreshold policy.
const compactionThresholdKey = "compactionThreshold/"

// compactionThreshold is namespace ns's compactionThreshold policy, ok
// false when it has none.
func (c *Cluster) compactionThreshold(ns string) (int64, bool) {
	b, ok, err := c.store.GetMeta(compactionThresholdKey + ns)
	if err != nil || !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(string(b), 10, 64)
	return v, err == nil
}

// adminGetCompactionThreshold answers the policy as a bare number, or
// an empty 200 when there is none, as Apache Pulsar.
func (c adminAPI) adminGetCompactionThreshold(w http.ResponseWriter, r *http.Request) (any, error) {
	if err := c.namespaceMustExist(r); err != nil {
		return nil, err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if v, ok := c.compactionThreshold(nsName(r)); ok {
		_, _ = io.WriteString(w, strconv.FormatInt(v, 10))
	}
	return struct{}{}, errWritten
}

// adminSetCompactionThreshold sets the policy: a JSON number of bytes,
// 0 or more (412 for a negative one, 400 for what is not a number, as
// Apache Pulsar).
func (c adminAPI) adminSetCompactionThreshold(_ http.ResponseWriter, r *http.Request) (any, error) {
	if err := c.namespaceMustExist(r); err != nil {
		return nil, err
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<10))
	if err != nil {
		return nil, herr(http.StatusBadRequest, "read body: %v", err)
	}
	var v int64
	if err := json.Unmarshal([]byte(strings.TrimSpace(string(body))), &v); err != nil {
		return nil, herr(http.StatusBadRequest, "body: want the threshold in bytes, a JSON number: %v", err)
	}
	if v < 0 {
		return nil, herr(http.StatusPreconditionFailed, "compactionThreshold must be 0 or more")
	}
	return nil, c.store.PutMeta(compactionThresholdKey+nsName(r), []byte(strconv.FormatInt(v, 10)))
}

func (c adminAPI) adminDeleteCompactionThreshold(_ http.ResponseWriter, r *http.Request) (any, error) {
	if err := c.namespaceMustExist(r); err != nil {
		return nil, err
	}
	return nil, c.store.DeleteMeta(compactionThresholdKey + nsName(r))
}
