package runtime_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/broker/faults"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire/pb"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// An exactly_once window host whose consumer subscribed again finds,
// when it takes its changelog to read the windows back, that another
// host took it meanwhile (ProducerFenced): that host held the
// subscription since. It must wait, fenced, for its subscription to come
// back and read back then, not fail the pipeline (the campaign's
// eo-window on Apache Pulsar: "read the windows back after subscribing
// again: ... ProducerFenced", the host exited). The broker refuses the
// host's fencing producer once in place of the other host; the input
// topic is unloaded to have the consumer subscribe again, twice.
// Embedded broker: it needs the broker to refuse the producer.
func TestExactlyOnceWindowsWaitWhenTheChangelogIsTakenDuringAReadBack(t *testing.T) {
	peer := txnPeer(t, "embedded")
	base := brokertest.TopicName(t)
	in, out := base+"-in", base+"-out"
	cl := clientURL(t, peer.URL)
	outs := collect(t, clientURL(t, peer.URL), out)
	w := pipelines.Window{Type: pipelines.Tumbling, Size: 5 * time.Second, Time: pipelines.TimeEvent, Mode: pipelines.ModeIncremental}
	p := windowPipeline(in, out, w, windowConfig{Incremental: true})
	exactlyOnceWindows(&p)
	r := runHost(t, nil, streamrun.Options{Logger: eoLogger(t), Pool: pool.Options{ServiceURL: peer.URL,
		OperationRetries: pool.OperationRetries{Delay: 100 * time.Millisecond}}}, p)
	at := func(key string, s int64) {
		publishOne(t, cl, in, pool.Message{Key: key, Payload: []byte(key), EventTime: time.UnixMilli(windowBase + s*1000)})
	}
	at("a", 101)
	at("a", 110) // a's [100,105) fires
	outs.waitLen(t, 1)

	taken := brokertest.Faults(t, peer.Cluster).Add(faults.Fault{Broker: -1, Command: pb.BaseCommand_PRODUCER, Topic: p.Window.Changelog,
		Err: pb.ServerError_ProducerFenced, Message: "Topic has an existing exclusive producer: another-host", Count: 1})
	unload := func() { peer.AdminDo(t, http.MethodPut, brokertest.AdminPath(in)+"/unload", "") }
	unload()
	waitFor(t, "the read back's changelog producer refused", func() bool { return taken.Fired() >= 1 })
	time.Sleep(time.Second)
	if h := r.health("windows"); h.State == streamrun.StateFailed {
		t.Fatalf("the pipeline failed when another host took its changelog during a read back: %s", h.Reason)
	}
	// The subscription comes back: read back, the host goes on.
	unload()
	at("a", 120) // a's [110,115) fires
	waitFor(t, "a's second window after the subscription came back", func() bool { return outs.len() >= 2 })
	if h := r.health("windows"); h.State == streamrun.StateFailed {
		t.Fatalf("the pipeline failed: %s", h.Reason)
	}
	checkFiresOnce(t, outs)
}
