package plugin

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/plugin/internal/pb"
	"github.com/streamrun/streamrun/plugin/internal/wire"
)

// A batch from a recycled frame has strings of its own: once its frame
// is read into again, a string a handler kept is as it was.
func TestStringsOutliveARecycledFrame(t *testing.T) {
	batch := &pb.Batch{Seq: 1, TimeoutMs: 30000}
	for i := range 3 {
		batch.Messages = append(batch.Messages, &pb.Message{Id: fmt.Sprintf("1:%d:-1:-1", i),
			Topic: "persistent://public/default/bench", Key: []byte(fmt.Sprintf("key-%d", i)),
			Properties: []*pb.Property{{Key: []byte("region"), Value: []byte(fmt.Sprint("eu-", i))}}, Payload: []byte("p")})
	}
	frame, err := proto.Marshal(batch)
	if err != nil {
		t.Fatal(err)
	}
	in := batchIn{chunk: new(wire.Chunk)}
	sc := new(scratch)
	if err := in.decode(frame, sc); err != nil {
		t.Fatal(err)
	}
	var propKey string
	for k := range in.msgs[2].Properties {
		propKey = k
	}
	kept := []string{in.msgs[2].ID, in.msgs[2].Key, in.msgs[2].Topic, propKey, in.msgs[2].Properties[propKey]}
	want := []string{"1:2:-1:-1", "key-2", "persistent://public/default/bench", "region", "eu-2"}
	clear(frame) // the next batch, read into the same chunk
	for i := range want {
		if kept[i] != want[i] {
			t.Errorf("kept string %d is %q after the frame was reused, want %q", i, kept[i], want[i])
		}
	}
}
