package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/streamrun/streamrun/pulsarwire"
)

// TopicPath is a topic's REST path: /admin/v2/persistent/t/ns/name.
func TopicPath(t pulsarwire.Topic) string {
	domain := "persistent"
	if !t.Persistent {
		domain = "non-persistent"
	}
	return "/admin/v2/" + domain + "/" + url.PathEscape(t.Tenant) + "/" + url.PathEscape(t.Namespace) + "/" + url.PathEscape(t.Local)
}

// Topics lists the persistent topics of namespace ("tenant/ns"), a
// partitioned topic once (not its partitions), sorted.
func (c *Client) Topics(ctx context.Context, namespace string) ([]string, error) {
	var plain, parted []string
	if err := c.Get(ctx, "/admin/v2/persistent/"+namespace, &plain); err != nil {
		return nil, err
	}
	if err := c.Get(ctx, "/admin/v2/persistent/"+namespace+"/partitioned", &parted); err != nil {
		return nil, err
	}
	out := []string{}
	for _, t := range plain {
		if pt, err := pulsarwire.ParseTopic(t); err == nil {
			if i, base := pt.PartitionIndex(); i >= 0 && slices.Contains(parted, base.String()) {
				continue
			}
		}
		out = append(out, t)
	}
	out = append(out, parted...)
	slices.Sort(out)
	return slices.Compact(out), nil
}

// CreateTopic creates topic, partitioned with partitions > 0.
func (c *Client) CreateTopic(ctx context.Context, topic string, partitions int) error {
	t, err := pulsarwire.ParseTopic(topic)
	if err != nil {
		return err
	}
	if partitions > 0 {
		_, err = c.Do(ctx, http.MethodPut, TopicPath(t)+"/partitions", partitions)
	} else {
		_, err = c.Do(ctx, http.MethodPut, TopicPath(t), nil)
	}
	return err
}

// Partitions is topic's partition count, 0 when it is not partitioned.
func (c *Client) Partitions(ctx context.Context, topic string) (int, error) {
	t, err := pulsarwire.ParseTopic(topic)
	if err != nil {
		return 0, err
	}
	var md struct {
		Partitions int `json:"partitions"`
	}
	if err := c.Get(ctx, TopicPath(t)+"/partitions", &md); err != nil {
		return 0, err
	}
	return md.Partitions, nil
}

// DeleteTopic deletes topic, partitioned or not, and returns its
// partition count; force deletes it even with producers or consumers
// connected.
func (c *Client) DeleteTopic(ctx context.Context, topic string, force bool) (partitions int, err error) {
	t, err := pulsarwire.ParseTopic(topic)
	if err != nil {
		return 0, err
	}
	n, err := c.Partitions(ctx, topic)
	if err != nil {
		return 0, err
	}
	path := TopicPath(t)
	if n > 0 {
		path += "/partitions"
	}
	if force {
		path += "?force=true"
	}
	_, err = c.Do(ctx, http.MethodDelete, path, nil)
	return n, err
}

// TopicStats is what the server says of a topic: a partitioned topic's
// totals over its partitions. The field names are Apache Pulsar's; Raw is
// the whole answer.
type TopicStats struct {
	MsgRateIn        float64                      `json:"msgRateIn"`
	MsgThroughputIn  float64                      `json:"msgThroughputIn"`
	MsgRateOut       float64                      `json:"msgRateOut"`
	MsgThroughputOut float64                      `json:"msgThroughputOut"`
	MsgInCounter     int64                        `json:"msgInCounter"`
	BytesInCounter   int64                        `json:"bytesInCounter"`
	MsgOutCounter    int64                        `json:"msgOutCounter"`
	BytesOutCounter  int64                        `json:"bytesOutCounter"`
	StorageSize      int64                        `json:"storageSize"`
	Publishers       []PublisherStats             `json:"publishers"`
	Subscriptions    map[string]SubscriptionStats `json:"subscriptions"`

	Raw json.RawMessage `json:"-"`
}

// PublisherStats is one producer of a topic.
type PublisherStats struct {
	ProducerName string  `json:"producerName"`
	MsgRateIn    float64 `json:"msgRateIn"`
	Address      string  `json:"address"`
}

// SubscriptionStats is one subscription of a topic.
type SubscriptionStats struct {
	Type            string  `json:"type"`
	MsgBacklog      int64   `json:"msgBacklog"`
	UnackedMessages int64   `json:"unackedMessages"`
	MsgOutCounter   int64   `json:"msgOutCounter"`
	MsgRateOut      float64 `json:"msgRateOut"`
	Consumers       []any   `json:"consumers"`
}

// TopicStats asks for topic's stats (partitioned-stats for a partitioned
// topic).
func (c *Client) TopicStats(ctx context.Context, topic string) (*TopicStats, error) {
	t, err := pulsarwire.ParseTopic(topic)
	if err != nil {
		return nil, err
	}
	n, err := c.Partitions(ctx, topic)
	if err != nil {
		return nil, err
	}
	path := TopicPath(t) + "/stats"
	if n > 0 {
		path = TopicPath(t) + "/partitioned-stats"
	}
	b, err := c.Do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	st := &TopicStats{Raw: b}
	if err := json.Unmarshal(b, st); err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	return st, nil
}

// InternalStats is how a topic is stored: its entries, size and cursors.
// Raw is the whole answer.
type InternalStats struct {
	NumberOfEntries    int64                  `json:"numberOfEntries"`
	TotalSize          int64                  `json:"totalSize"`
	LastConfirmedEntry string                 `json:"lastConfirmedEntry"`
	Cursors            map[string]CursorStats `json:"cursors"`
	Raw                json.RawMessage        `json:"-"`
}

// CursorStats is one subscription's cursor as stored.
type CursorStats struct {
	MarkDeletePosition  string `json:"markDeletePosition"`
	ReadPosition        string `json:"readPosition"`
	IndividuallyDeleted string `json:"individuallyDeletedMessages"`
}

// InternalStats asks how topic is stored.
func (c *Client) InternalStats(ctx context.Context, topic string) (*InternalStats, error) {
	t, err := pulsarwire.ParseTopic(topic)
	if err != nil {
		return nil, err
	}
	path := TopicPath(t) + "/internalStats"
	b, err := c.Do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	st := &InternalStats{Raw: b}
	if err := json.Unmarshal(b, st); err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	return st, nil
}

// Subscriptions lists topic's subscriptions, sorted.
func (c *Client) Subscriptions(ctx context.Context, topic string) ([]string, error) {
	t, err := pulsarwire.ParseTopic(topic)
	if err != nil {
		return nil, err
	}
	subs := []string{}
	if err := c.Get(ctx, TopicPath(t)+"/subscriptions", &subs); err != nil {
		return nil, err
	}
	slices.Sort(subs)
	return subs, nil
}

// ResetTarget is where ResetCursor moves a subscription: Latest, a time
// (earliest is the time 0) or a message id.
type ResetTarget struct {
	Latest bool
	Time   time.Time
	ID     *pulsarwire.MessageID
}

// ParseResetTarget reads earliest, latest, an RFC 3339 time, a duration
// before now ("10m") or a message id ledger:entry:partition[:batch].
func ParseResetTarget(s string, now time.Time) (ResetTarget, error) {
	switch strings.ToLower(s) {
	case "earliest":
		return ResetTarget{Time: time.UnixMilli(0)}, nil
	case "latest":
		return ResetTarget{Latest: true}, nil
	}
	if tm, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return ResetTarget{Time: tm}, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return ResetTarget{Time: now.Add(-d)}, nil
	}
	if id, err := pulsarwire.ParseMessageID(s); err == nil {
		return ResetTarget{ID: &id}, nil
	}
	return ResetTarget{}, fmt.Errorf("%q: want earliest, latest, an RFC 3339 time, a duration ago (10m) or a message id ledger:entry:partition[:batch]", s)
}

// ResetCursor moves subscription of topic to to; its consumers are
// disconnected and resume there.
func (c *Client) ResetCursor(ctx context.Context, topic, subscription string, to ResetTarget) error {
	t, err := pulsarwire.ParseTopic(topic)
	if err != nil {
		return err
	}
	sub := TopicPath(t) + "/subscription/" + url.PathEscape(subscription)
	switch {
	case to.Latest:
		// Everything published so far counts as acknowledged.
		_, err = c.Do(ctx, http.MethodPost, sub+"/skip_all", nil)
	case to.ID != nil:
		_, err = c.Do(ctx, http.MethodPost, sub+"/resetcursor", map[string]any{
			"ledgerId": int64(to.ID.Ledger), "entryId": int64(to.ID.Entry), "partitionIndex": to.ID.Partition,
		})
	default:
		_, err = c.Do(ctx, http.MethodPost, sub+"/resetcursor/"+strconv.FormatInt(to.Time.UnixMilli(), 10), nil)
	}
	return err
}
