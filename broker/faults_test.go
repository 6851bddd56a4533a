package broker_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/broker/faults"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// The fault API is off by default and, installed (faults.InstallAPI),
// adds and removes faults and refuses names the protocol does not have.
func TestFaultAPI(t *testing.T) {
	off := brokertest.Start(t)
	adminDo(t, "POST", off.AdminURL()+"/admin/v2/streamrun/faults", `{"command":"LOOKUP"}`, 404)

	var set faults.Set
	c := brokertest.Start(t, set.InstallAPI)
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

	// drop_answer: handled, then the connection closed with no answer.
	adminDo(t, "POST", base+"faults", `{"command":"PARTITIONED_METADATA","drop_answer":true,"count":1}`, 200)
	q := dial(t, c.ServiceURL())
	q.send(&pb.CommandPartitionedTopicMetadata{Topic: proto.String("persistent://public/default/dropped"), RequestId: proto.Uint64(1)})
	if !q.closedByBroker() {
		t.Fatal("drop_answer left the connection open")
	}
	for len(q.frames) > 0 {
		if f := <-q.frames; f.Cmd.GetType() == pb.BaseCommand_PARTITIONED_METADATA_RESPONSE {
			t.Fatalf("drop_answer let the answer out: %v", f.Cmd)
		}
	}
}
