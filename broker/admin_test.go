package broker_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// adminDo makes a request and checks its status; it returns the body.
func adminDo(t *testing.T, method, url, body string, want int, header ...string) string {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s, want %d", method, url, resp.StatusCode, b, want)
	}
	return string(b)
}

func TestAdminTopicsAndPartitions(t *testing.T) {
	c := brokertest.Start(t)
	base := c.AdminURL() + "/admin/v2"
	// An empty list is [], not null: pulsar-admin cannot read null.
	if got := strings.TrimSpace(adminDo(t, "GET", base+"/persistent/public/default/partitioned", "", 200)); got != "[]" {
		t.Errorf("no partitioned topics: got %s, want []", got)
	}
	if got := adminDo(t, "GET", base+"/clusters", "", 200); !strings.Contains(got, "standalone") {
		t.Errorf("clusters %s", got)
	}
	if got := adminDo(t, "GET", base+"/tenants", "", 200); !strings.Contains(got, `"public"`) {
		t.Errorf("tenants %s", got)
	}
	adminDo(t, "PUT", base+"/tenants/acme", `{"allowedClusters":["standalone"]}`, 204)
	adminDo(t, "PUT", base+"/namespaces/acme/ns", "", 204)
	if got := adminDo(t, "GET", base+"/namespaces/acme", "", 200); got != "[\"acme/ns\"]\n" {
		t.Errorf("namespaces %q", got)
	}

	ns := base + "/persistent/acme/ns"
	adminDo(t, "PUT", ns+"/plain", "", 204)
	adminDo(t, "PUT", ns+"/plain", "", 409)
	adminDo(t, "PUT", ns+"/parted/partitions", "2", 204)
	adminDo(t, "PUT", ns+"/parted/partitions", "2", 409)
	adminDo(t, "PUT", ns+"/bad/partitions", "0", 406)
	if got := adminDo(t, "GET", ns+"/parted/partitions", "", 200); !strings.Contains(got, `"partitions":2`) {
		t.Errorf("partitions %s", got)
	}
	adminDo(t, "POST", ns+"/parted/partitions", "4", 204)
	adminDo(t, "POST", ns+"/parted/partitions", "3", 422)
	var list []string
	json.Unmarshal([]byte(adminDo(t, "GET", ns, "", 200)), &list)
	if len(list) != 5 {
		t.Errorf("topics %v", list)
	}
	if got := adminDo(t, "GET", ns+"/partitioned", "", 200); got != "[\"persistent://acme/ns/parted\"]\n" {
		t.Errorf("partitioned %q", got)
	}

	p := dial(t, c.ServiceURL())
	topic := "persistent://acme/ns/plain"
	cid := p.subscribe(topic, "s", pb.CommandSubscribe_Shared)
	publishN(t, p, topic, 3, nil)
	if got := adminDo(t, "GET", ns+"/plain/subscriptions", "", 200); got != "[\"s\"]\n" {
		t.Errorf("subscriptions %q", got)
	}
	var st struct {
		MsgInCounter  int64 `json:"msgInCounter"`
		Subscriptions map[string]struct {
			MsgBacklog int64 `json:"msgBacklog"`
		} `json:"subscriptions"`
	}
	json.Unmarshal([]byte(adminDo(t, "GET", ns+"/plain/stats", "", 200)), &st)
	if st.MsgInCounter != 3 || st.Subscriptions["s"].MsgBacklog != 3 {
		t.Errorf("stats %+v", st)
	}
	adminDo(t, "DELETE", ns+"/plain/subscription/s", "", 412)
	adminDo(t, "DELETE", ns+"/plain", "", 412)
	adminDo(t, "DELETE", ns+"/plain?force=true", "", 204)
	p.expect("CLOSE_CONSUMER", func(c *pb.BaseCommand) bool {
		return c.GetType() == pb.BaseCommand_CLOSE_CONSUMER && c.GetCloseConsumer().GetConsumerId() == cid
	})
	p.expect("CLOSE_PRODUCER", func(c *pb.BaseCommand) bool { return c.GetType() == pb.BaseCommand_CLOSE_PRODUCER })
	adminDo(t, "GET", ns+"/plain/stats", "", 404)
	adminDo(t, "DELETE", ns+"/plain", "", 404)
	adminDo(t, "DELETE", ns+"/parted/partitions", "", 204)
	if got := adminDo(t, "GET", ns, "", 200); got != "[]\n" {
		t.Errorf("topics after deletes %q", got)
	}
	if got := adminDo(t, "GET", base+"/nothing/here", "", 404); !strings.Contains(got, `"reason"`) {
		t.Errorf("unknown path: %s", got)
	}
}

func TestAdminClearBacklogAndResetCursor(t *testing.T) {
	c := brokertest.Start(t)
	p := dial(t, c.ServiceURL())
	cid := p.subscribe("ops", "s", pb.CommandSubscribe_Exclusive)
	publishN(t, p, "ops", 5, nil)
	path := c.AdminURL() + "/admin/v2/persistent/public/default/ops/subscription/s"
	adminDo(t, "POST", path+"/skip_all", "", 204)
	if b := c.Backlog("ops", "s"); b != 0 {
		t.Fatalf("backlog after clear-backlog: %d", b)
	}
	adminDo(t, "POST", path+"/resetcursor/0", "", 204)
	p.expect("CLOSE_CONSUMER", func(c *pb.BaseCommand) bool {
		return c.GetType() == pb.BaseCommand_CLOSE_CONSUMER && c.GetCloseConsumer().GetConsumerId() == cid
	})
	if b := c.Backlog("ops", "s"); b != 5 {
		t.Fatalf("backlog after reset-cursor to 0: %d", b)
	}
	adminDo(t, "POST", c.AdminURL()+"/admin/v2/persistent/public/default/ops/subscription/nope/skip_all", "", 404)
}

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
