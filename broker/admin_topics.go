package broker

// The admin API of topics: persistent and partitioned topics (create,
// list, grow, delete), unload and the HTTP lookup.

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/streamrun/streamrun/pulsarwire"
)

// topicName is the topic a request's path names; a name that is a path
// step ("." or ".."), over-long or otherwise invalid gets 412.
func topicName(r *http.Request) (pulsarwire.Topic, error) {
	full := "persistent://" + nsName(r) + "/" + r.PathValue("topic")
	if len(full) > maxTopicNameBytes {
		return pulsarwire.Topic{}, herr(http.StatusPreconditionFailed, "Invalid topic name: %d bytes, the limit is %d", len(full), maxTopicNameBytes)
	}
	if err := checkName("tenant", r.PathValue("tenant"), true); err != nil {
		return pulsarwire.Topic{}, err
	}
	if err := checkName("namespace", r.PathValue("ns"), true); err != nil {
		return pulsarwire.Topic{}, err
	}
	if l := r.PathValue("topic"); l == "." || l == ".." {
		return pulsarwire.Topic{}, herr(http.StatusPreconditionFailed, "Invalid topic name %q", l)
	}
	t, err := pulsarwire.ParseTopic(full)
	if err != nil {
		return t, herr(http.StatusPreconditionFailed, "Invalid topic name: %v", err)
	}
	return t, nil
}

func (c adminAPI) adminListTopics(_ http.ResponseWriter, r *http.Request) (any, error) {
	out := c.listTopics(nsName(r))
	if out == nil {
		out = []string{}
	}
	return out, nil
}

func (c adminAPI) adminListPartitioned(_ http.ResponseWriter, r *http.Request) (any, error) {
	return sortedNames(c.partitionedTopics(nsName(r))), nil
}

func (c adminAPI) adminCreateTopic(_ http.ResponseWriter, r *http.Request) (any, error) {
	t, err := topicName(r)
	if err != nil {
		return nil, err
	}
	if _, ok := c.partitions(t.String()); ok || c.topicExists(t) {
		return nil, herr(http.StatusConflict, "This topic already exists")
	}
	if _, err := c.store.Topic(t.String()); err != nil {
		return nil, err
	}
	return nil, nil
}

func (c adminAPI) adminDeleteTopic(_ http.ResponseWriter, r *http.Request) (any, error) {
	t, err := topicName(r)
	if err != nil {
		return nil, err
	}
	force := r.URL.Query().Get("force") == "true"
	switch err := c.deleteTopic(t.String(), force); {
	case errors.Is(err, errTopicNotFound):
		return nil, herr(http.StatusNotFound, "Topic not found")
	case errors.Is(err, errTopicBusy):
		return nil, herr(http.StatusPreconditionFailed, "Topic has active producers/subscriptions")
	case err != nil:
		return nil, err
	}
	return nil, nil
}

type partitionedMetadata struct {
	Partitions int  `json:"partitions"`
	Deleted    bool `json:"deleted"`
}

func (c adminAPI) adminGetPartitions(_ http.ResponseWriter, r *http.Request) (any, error) {
	t, err := topicName(r)
	if err != nil {
		return nil, err
	}
	n, _ := c.partitions(t.String())
	return partitionedMetadata{Partitions: n}, nil
}

func readCount(r *http.Request) (int, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<10))
	if err != nil {
		return 0, herr(http.StatusBadRequest, "read body: %v", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(body)))
	if err != nil {
		return 0, herr(http.StatusBadRequest, "The number of partitions must be a number, got %q", body)
	}
	return n, nil
}

func (c adminAPI) adminCreatePartitioned(_ http.ResponseWriter, r *http.Request) (any, error) {
	t, err := topicName(r)
	if err != nil {
		return nil, err
	}
	n, err := readCount(r)
	if err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, herr(http.StatusNotAcceptable, "Number of partitions should be more than 0")
	}
	if _, ok := c.partitions(t.String()); ok || c.topicExists(t) {
		return nil, herr(http.StatusConflict, "This topic already exists")
	}
	return nil, c.createPartitions(t, 0, n)
}

// createPartitions creates partitions [from, to) and records the count.
func (c adminAPI) createPartitions(t pulsarwire.Topic, from, to int) error {
	for i := from; i < to; i++ {
		if _, err := c.store.Topic(t.Partition(i).String()); err != nil {
			return err
		}
	}
	return c.setPartitions(t.String(), to)
}

func (c adminAPI) adminUpdatePartitions(_ http.ResponseWriter, r *http.Request) (any, error) {
	t, err := topicName(r)
	if err != nil {
		return nil, err
	}
	n, err := readCount(r)
	if err != nil {
		return nil, err
	}
	cur, ok := c.partitions(t.String())
	if !ok {
		return nil, herr(http.StatusNotFound, "Partitioned topic does not exist")
	}
	if n <= cur {
		return nil, herr(http.StatusUnprocessableEntity, "Desired partitions %d should be greater than current partitions %d", n, cur)
	}
	return nil, c.createPartitions(t, cur, n)
}

func (c adminAPI) adminDeletePartitioned(_ http.ResponseWriter, r *http.Request) (any, error) {
	t, err := topicName(r)
	if err != nil {
		return nil, err
	}
	n, ok := c.partitions(t.String())
	if !ok {
		return nil, herr(http.StatusNotFound, "Partitioned topic does not exist")
	}
	force := r.URL.Query().Get("force") == "true"
	if !force {
		for i := 0; i < n; i++ {
			if tp := c.loaded(t.Partition(i).String()); tp != nil && tp.connected() {
				return nil, herr(http.StatusPreconditionFailed, "Topic has active producers/subscriptions")
			}
		}
	}
	for i := 0; i < n; i++ {
		if err := c.deleteTopic(t.Partition(i).String(), true); err != nil && !errors.Is(err, errTopicNotFound) {
			return nil, err
		}
	}
	return nil, c.store.DeleteMeta(partitionsKey + t.String())
}

// adminUnload (pulsar-admin topics unload) unloads a topic, or each
// partition of a partitioned one, as Apache Pulsar does: its producers
// and consumers get CLOSE_PRODUCER / CLOSE_CONSUMER and look it up again;
// the cursors are saved first. A topic that exists but is not loaded has
// nothing to close. With ?destinationBroker= (an index or a broker's
// host:port) the topic moves to that broker (MoveTopic).
func (c adminAPI) adminUnload(_ http.ResponseWriter, r *http.Request) (any, error) {
	t, err := topicName(r)
	if err != nil {
		return nil, err
	}
	found := false
	for _, p := range c.partitionsOf(t) {
		found = found || c.topicExists(p)
	}
	if !found {
		return nil, herr(http.StatusNotFound, "Topic %s not found", t.String())
	}
	if dest := r.URL.Query().Get("destinationBroker"); dest != "" {
		i := c.brokerIndex(dest)
		if i < 0 {
			return nil, herr(http.StatusBadRequest, "destinationBroker %q: no such broker (want an index or one of %v)", dest, c.BrokerURLs())
		}
		return nil, c.MoveTopic(t.String(), i)
	}
	for _, p := range c.partitionsOf(t) {
		c.unloadTopic(p.String())
	}
	return nil, nil
}

func (c adminAPI) adminLookup(_ http.ResponseWriter, r *http.Request) (any, error) {
	t, err := topicName(r)
	if err != nil {
		return nil, err
	}
	s := c.broker(c.OwnerOf(t.String()))
	return setURLs("brokerUrl", s.url(), "httpUrl", c.adminURL, "brokerUrlTls", s.tlsURL(), "httpUrlTls", c.adminURLTLS), nil
}
