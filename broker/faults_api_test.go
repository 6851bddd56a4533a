package broker_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// An unload with ?destinationBroker= moves the topic: lookups name the new
// owner from then on, and the clients of the old one come back there.
func TestAdminUnloadMovesTopic(t *testing.T) {
	c := brokertest.Start(t, func(o *broker.Options) { o.Brokers = 3 })
	const topic = "persistent://public/default/move-me"
	from := c.OwnerOf(topic)
	to := (from + 1) % 3
	dial(t, c.BrokerURLs()[from]).producer(topic)
	dest := strings.TrimPrefix(c.BrokerURLs()[to], "pulsar://")
	adminDo(t, "PUT", c.AdminURL()+"/admin/v2/persistent/public/default/move-me/unload?destinationBroker="+dest, "", 204)
	if got := c.OwnerOf(topic); got != to {
		t.Fatalf("owner after the move: %d, want %d", got, to)
	}
	var look map[string]string
	body := adminDo(t, "GET", c.AdminURL()+"/lookup/v2/topic/persistent/public/default/move-me", "", 200)
	if err := json.Unmarshal([]byte(body), &look); err != nil || look["brokerUrl"] != c.BrokerURLs()[to] {
		t.Fatalf("lookup after the move: %s (%v), want %s", body, err, c.BrokerURLs()[to])
	}
	if _, err := dial(t, c.BrokerURLs()[from]).createProducer(topic, ""); err == nil {
		t.Fatalf("the old owner still takes producers after the move")
	}
	dial(t, c.BrokerURLs()[to]).producer(topic)
	adminDo(t, "PUT", c.AdminURL()+"/admin/v2/persistent/public/default/move-me/unload?destinationBroker=9", "", 400)
}

// The fault API is off by default and, with FaultAPI, adds and removes
// faults and refuses names the protocol does not have.
func TestFaultAPI(t *testing.T) {
	off := brokertest.Start(t)
	adminDo(t, "POST", off.AdminURL()+"/admin/v2/streamrun/faults", `{"command":"LOOKUP"}`, 404)

	c := brokertest.Start(t, func(o *broker.Options) { o.FaultAPI = true })
	base := c.AdminURL() + "/admin/v2/streamrun/"
	adminDo(t, "POST", base+"faults", `{"command":"NOPE"}`, 400)
	adminDo(t, "POST", base+"faults", `{"error":"Nope"}`, 400)
	adminDo(t, "POST", base+"faults", `{"delay":"soon"}`, 400)
	body := adminDo(t, "POST", base+"faults", `{"command":"PRODUCER","error":"TooManyRequests","topic":"limited"}`, 200)
	var id map[string]int
	if err := json.Unmarshal([]byte(body), &id); err != nil || id["id"] == 0 {
		t.Fatalf("add fault: %s (%v)", body, err)
	}
	p := dial(t, c.ServiceURL())
	_, err := p.createProducer("persistent://public/default/limited", "")
	var se *pulsarwire.ServerError
	if !errors.As(err, &se) || se.Code != pb.ServerError_TooManyRequests {
		t.Fatalf("producer under the fault: %v, want TooManyRequests", err)
	}
	if got := adminDo(t, "GET", base+"faults", "", 200); !strings.Contains(got, `:1`) {
		t.Fatalf("faults in place: %s, want one that fired once", got)
	}
	adminDo(t, "DELETE", base+"faults/"+strings.TrimSpace(strings.Trim(strings.TrimPrefix(body, `{"id":`), "}\n")), "", 204)
	p.producer("persistent://public/default/limited")
	adminDo(t, "POST", base+"brokers/0/drop-connections", "", 204)
	adminDo(t, "POST", base+"brokers/5/restart", "", 400)
	adminDo(t, "POST", base+"brokers/0/restart?down=10ms", "", 204)
	dial(t, c.ServiceURL()).producer("persistent://public/default/after-restart")
}
