package broker

// The admin API of subscriptions: list, create, delete, clear the backlog,
// reset the cursor by time or by message id.

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
)

func (c adminAPI) adminSubscriptions(_ http.ResponseWriter, r *http.Request) (any, error) {
	t, err := topicName(r)
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	found := false
	for _, p := range c.partitionsOf(t) {
		tp, err := c.topicFor(p, false)
		if err != nil {
			continue
		}
		found = true
		for _, s := range tp.subscriptions() {
			set[s.name] = true
		}
	}
	if !found {
		return nil, herr(http.StatusNotFound, "Topic not found")
	}
	return sortedNames(set), nil
}

func (c adminAPI) adminCreateSubscription(_ http.ResponseWriter, r *http.Request) (any, error) {
	t, err := topicName(r)
	if err != nil {
		return nil, err
	}
	sub := r.PathValue("sub")
	if err := checkName("subscription", sub, false); err != nil {
		return nil, err
	}
	body, _ := io.ReadAll(r.Body)
	if err := checkJSON("message id", body); err != nil {
		return nil, err
	}
	earliest := strings.Contains(string(body), "earliest") || strings.Contains(string(body), `"ledgerId":-1`)
	for _, p := range c.partitionsOf(t) {
		tp, err := c.topicFor(p, true)
		if err != nil {
			return nil, herr(http.StatusNotFound, "Topic not found")
		}
		tp.mu.Lock()
		_, exists := tp.subs[sub]
		tp.mu.Unlock()
		if exists {
			return nil, herr(http.StatusConflict, "Subscription already exists for topic")
		}
		tp.ensureSubscription(sub)
		if s := tp.subscription(sub); s != nil && earliest {
			s.mu.Lock()
			s.reset(tp.log.First())
			s.mu.Unlock()
			s.save()
		}
	}
	return nil, nil
}

func (c adminAPI) adminDeleteSubscription(_ http.ResponseWriter, r *http.Request) (any, error) {
	t, err := topicName(r)
	if err != nil {
		return nil, err
	}
	force := r.URL.Query().Get("force") == "true"
	found := false
	for _, p := range c.partitionsOf(t) {
		tp, err := c.topicFor(p, false)
		if err != nil {
			continue
		}
		switch err := tp.deleteSubscription(r.PathValue("sub"), force); {
		case err == nil:
			found = true
		case errors.Is(err, errSubscriptionBusy):
			return nil, herr(http.StatusPreconditionFailed, "Subscription has active connected consumers")
		case errors.Is(err, errSubscriptionNotFound):
		default:
			return nil, err
		}
	}
	if !found {
		return nil, herr(http.StatusNotFound, "Subscription not found")
	}
	return nil, nil
}

// eachSubscription runs f on the named subscription of a topic or of each
// of its partitions; 404 when there is none.
func (c adminAPI) eachSubscription(r *http.Request, f func(*subscription) error) error {
	t, err := topicName(r)
	if err != nil {
		return err
	}
	found := false
	for _, p := range c.partitionsOf(t) {
		tp, err := c.topicFor(p, false)
		if err != nil {
			continue
		}
		if s := tp.subscription(r.PathValue("sub")); s != nil {
			found = true
			if err := f(s); err != nil {
				return err
			}
		}
	}
	if !found {
		return herr(http.StatusNotFound, "Subscription not found")
	}
	return nil
}

// adminClearBacklog (pulsar-admin topics clear-backlog) acknowledges
// everything published so far; consumers stay connected.
func (c adminAPI) adminClearBacklog(_ http.ResponseWriter, r *http.Request) (any, error) {
	return nil, c.eachSubscription(r, func(s *subscription) error {
		end := s.t.log.Next()
		s.mu.Lock()
		s.reset(end)
		s.mu.Unlock()
		s.save()
		s.wakeup()
		return nil
	})
}

// adminResetCursor (pulsar-admin topics reset-cursor --time) moves the
// subscription to the first message published at or after the time and,
// as Apache Pulsar, disconnects its consumers so they resume from there.
func (c adminAPI) adminResetCursor(_ http.ResponseWriter, r *http.Request) (any, error) {
	ms, err := strconv.ParseInt(r.PathValue("timestamp"), 10, 64)
	if err != nil {
		return nil, herr(http.StatusPreconditionFailed, "Invalid timestamp %q", r.PathValue("timestamp"))
	}
	return nil, c.eachSubscription(r, func(s *subscription) error {
		pos, err := s.t.log.SeekTime(ms)
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.reset(pos)
		s.mu.Unlock()
		s.closeAll()
		s.save()
		return nil
	})
}

// messageIDBody is the JSON body of reset-cursor to a message id, as
// Apache Pulsar's admin API takes it.
type messageIDBody struct {
	LedgerID       int64 `json:"ledgerId"`
	EntryID        int64 `json:"entryId"`
	PartitionIndex int32 `json:"partitionIndex"`
	IsExcluded     bool  `json:"isExcluded"`
}

// adminResetCursorToID (pulsar-admin topics reset-cursor -m ID) moves the
// subscription so the message id is the next delivered (the one after it
// with isExcluded) and disconnects its consumers, as Apache Pulsar does.
func (c adminAPI) adminResetCursorToID(_ http.ResponseWriter, r *http.Request) (any, error) {
	var id messageIDBody
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<12)).Decode(&id); err != nil {
		return nil, herr(http.StatusBadRequest, "Invalid message id: %v", err)
	}
	t, err := topicName(r)
	if err != nil {
		return nil, err
	}
	if _, ok := c.partitions(t.String()); ok {
		if id.PartitionIndex < 0 {
			return nil, herr(http.StatusPreconditionFailed, "A partitioned topic needs the message id's partition")
		}
		t = t.Partition(int(id.PartitionIndex))
	}
	tp, err := c.existingTopic(t)
	if err != nil {
		return nil, err
	}
	s := tp.subscription(r.PathValue("sub"))
	if s == nil {
		return nil, herr(http.StatusNotFound, "Subscription not found")
	}
	at := min(max(id.EntryID, int64(tp.log.First())), int64(tp.log.Next()))
	if id.LedgerID != int64(tp.ledger) {
		// Another incarnation's ledger: before ours is the start, after it the end.
		if id.LedgerID < int64(tp.ledger) {
			at = int64(tp.log.First())
		} else {
			at = int64(tp.log.Next())
		}
	} else if id.IsExcluded && at < int64(tp.log.Next()) {
		at++
	}
	s.mu.Lock()
	s.reset(uint64(at))
	s.mu.Unlock()
	s.closeAll()
	s.save()
	return nil, nil
}
