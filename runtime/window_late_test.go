package runtime_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	streamrun "github.com/streamrun/streamrun/runtime"
	"github.com/streamrun/streamrun/subscribe"
)

// Messages later than the allowed lateness go to window.late_topic
// whole (payload, key, properties and event time kept; the watermark
// they came behind and where they came from added), and join no window;
// without a late_topic they are dropped and counted.
func TestLateMessagesArePublishedToTheLateTopicOrDropped(t *testing.T) {
	for _, withTopic := range []bool{true, false} {
		t.Run(fmt.Sprintf("late_topic=%v", withTopic), func(t *testing.T) {
			peer := brokertest.Target(t)
			base := brokertest.TopicName(t)
			in, out, lateTopic := base+"-in", base+"-out", base+"-late"
			cl := clientURL(t, peer.URL)
			outs := windowResults{collect(t, cl, out)}
			lates := collect(t, cl, lateTopic)
			w := pipelines.Window{Type: pipelines.Tumbling, Size: 10 * time.Second, AllowedLateness: 5 * time.Second, Time: pipelines.TimeEvent}
			if withTopic {
				w.LateTopic = lateTopic
			}
			r := runHost(t, nil, streamrun.Options{Pool: pool.Options{ServiceURL: peer.URL}}, windowPipeline(in, out, w, windowConfig{}))
			at := func(key, payload string, s int64, props map[string]string) {
				publishOne(t, cl, in, pool.Message{Key: key, Payload: []byte(payload), Properties: props,
					EventTime: time.UnixMilli(windowBase + s*1000)})
			}
			at("a", "on-time", 101, nil)
			at("b", "watermark", 200, nil) // [100,110) fires and is forgotten (110+5 <= 200)
			const late = 3
			for i := range late {
				at("a", fmt.Sprintf("late-%d", i), 102+int64(i), map[string]string{"origin": strconv.Itoa(i)})
			}
			at("b", "watermark-2", 300, nil) // [200,210) of b fires: every late message was judged by then
			waitFor(t, "b's first window and a's", func() bool { return len(outs.get(t)) >= 2 })
			waitFor(t, "every message settled", func() bool { return r.stats("windows").Dropped >= late })
			for id, res := range outs.get(t) {
				for _, p := range res.Payloads {
					if len(p) > 4 && p[:5] == "late-" {
						t.Errorf("window %v holds the late message %s", id, p)
					}
				}
			}
			if !withTopic {
				if s := r.stats("windows"); s.Dropped != late {
					t.Errorf("%d dropped, want the %d late messages", s.Dropped, late)
				}
				return
			}
			got := lates.waitLen(t, late)
			byPayload := map[string]*subscribe.Message{}
			for _, m := range got {
				byPayload[string(m.Payload)] = m
			}
			for i := range late {
				m := byPayload[fmt.Sprintf("late-%d", i)]
				switch {
				case m == nil:
					t.Errorf("late-%d is not on the late topic (got %d messages)", i, len(got))
				case m.Key != "a" || m.Properties["origin"] != strconv.Itoa(i) ||
					m.EventTime.UnixMilli() != windowBase+(102+int64(i))*1000:
					t.Errorf("late-%d came as key %q, properties %v, event time %v", i, m.Key, m.Properties, m.EventTime)
				case m.Properties[streamrun.PropertyLate] != strconv.FormatInt(windowBase+200_000, 10):
					t.Errorf("late-%d: %s is %q, want the watermark it came behind (%d)", i, streamrun.PropertyLate,
						m.Properties[streamrun.PropertyLate], windowBase+200_000)
				case m.Properties[subscribe.PropertyRealTopic] == "":
					t.Errorf("late-%d does not say where it came from: %v", i, m.Properties)
				}
			}
		})
	}
}
