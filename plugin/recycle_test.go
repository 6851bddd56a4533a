package plugin

import (
	"testing"

	"github.com/streamrun/streamrun/plugin/internal/wire"
)

// A batch from a recycled frame has strings of its own: once its frame
// is read into again, a string a handler kept is as it was.
func TestStringsOutliveARecycledFrame(t *testing.T) {
	frame := benchBatchFrame(t, 3)
	in := batchIn{chunk: new(wire.Chunk)}
	sc := new(scratch)
	if err := in.decode(frame, sc); err != nil {
		t.Fatal(err)
	}
	kept := []string{in.msgs[2].ID, in.msgs[2].Key, in.msgs[2].Topic}
	want := []string{"1:2:-1:-1", "key-2", "persistent://public/default/bench"}
	clear(frame) // the next batch, read into the same chunk
	for i := range want {
		if kept[i] != want[i] {
			t.Errorf("kept string %d is %q after the frame was reused, want %q", i, kept[i], want[i])
		}
	}
}
