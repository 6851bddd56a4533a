package runtime_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// A window pipeline reading a topic of three partitions whose event times
// are skewed apart by more than out_of_order: partition 1 runs five
// minutes behind partition 0, partition 2 ten. The pipeline's watermark is
// the least of its partitions' (docs/pipelines.md, "Watermarks"), so no
// message of a partition behind the others is late and every window
// equals the reference over all the messages. A watermark taken from the
// newest partition would drop the partitions behind as late, whatever
// the order in which the host reads them.
func TestWindowsOverSkewedPartitionsEqualTheReference(t *testing.T) {
	for _, k := range windowKinds[:3] {
		t.Run(k.name, func(t *testing.T) {
			peer := brokertest.Target(t)
			base := brokertest.TopicName(t)
			in, out := base+"-in", base+"-out"
			const parts = 3
			peer.CreatePartitioned(t, in, parts)
			cl := clientURL(t, peer.URL)

			w := k.w
			w.Time = pipelines.TimeEvent
			// generate's messages are out of order by up to 8 s and late by
			// up to 2 min within a partition; 3 min keeps all of them, so
			// what a window holds does not depend on the order across
			// partitions, only on the watermark being their least.
			w.OutOfOrder = 3 * time.Minute
			var all []genMsg
			for p := range parts {
				skew := int64(p) * 5 * 60_000
				msgs := generate(uint64(len(base)+p), 150, 3)
				for i := range msgs {
					if msgs[i].key != flushKey {
						msgs[i].key = fmt.Sprintf("p%d-%s", p, msgs[i].key)
						msgs[i].t -= skew
					}
					msgs[i].payload = fmt.Sprintf("p%d-%s", p, msgs[i].payload)
				}
				// Each partition gets its own flush message, last, so that
				// every partition's watermark passes every window.
				publishGenerated(t, cl, fmt.Sprintf("%s-partition-%d", in, p), msgs, false)
				all = append(all, msgs[:len(msgs)-1]...) // the flush is no window's

			}
			ref := w
			ref.OutOfOrder = 24 * time.Hour // nothing late: the reference holds every message
			want, late := referenceWindows(ref, all)
			if late != 0 {
				t.Fatalf("the reference has %d late messages; the test wants none", late)
			}
			t.Logf("%d messages over %d partitions; %d windows in the reference", len(all), parts, len(want))
			outs := windowResults{collect(t, cl, out)}
			p := windowPipeline(in, out, w, windowConfig{})
			r := runHost(t, nil, streamrun.Options{Pool: pool.Options{ServiceURL: peer.URL}}, p)
			waitAgree(t, outs, want)
			if s := r.stats("windows"); s.Dropped != 0 {
				t.Errorf("%d messages dropped as late; want none: the partitions behind hold the watermark back", s.Dropped)
			}
		})
	}
}
