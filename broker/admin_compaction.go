package broker

import (
	"errors"
	"net/http"
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
