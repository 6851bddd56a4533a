package broker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// An END_TXN that comes while the transaction's end is under way (a
// client asking again after the first answer was lost with its
// connection) is answered as Apache Pulsar's coordinator answers, which
// keeps the transaction until its end is done: the same end waits for it
// and succeeds; the other is refused with InvalidTxnStatus; once done,
// TransactionNotFound. Before, both were TransactionNotFound at once,
// which a client must take for an unknown outcome, although the end was
// going to commit. The end is held on its first topic.
func TestTxnEndAskedAgainWhileItEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{Memory: true, Transactions: true, Listen: freeAddr(t), HTTP: freeAddr(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	client, err := pool.New(ctx, pool.Options{ServiceURL: c.ServiceURL()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(context.Background())
	topic := fmt.Sprintf("persistent://public/default/txn-ending-%d", time.Now().UnixNano())
	if _, err := client.Producer(ctx, topic); err != nil { // the topic exists: the end is held there
		t.Fatal(err)
	}
	tc := c.txns
	id, err := tc.begin("", 60000)
	if err != nil {
		t.Fatal(err)
	}
	if err := tc.addSubs(id, "", []*pb.Subscription{{Topic: proto.String(topic), Subscription: proto.String("s")}}); err != nil {
		t.Fatal(err)
	}
	held, release := make(chan struct{}), make(chan struct{})
	hold := func(string) {
		close(held)
		<-release
	}
	tc.endingOn.Store(&hold)
	first, again := make(chan error, 1), make(chan error, 1)
	go func() { first <- tc.end(id, "", pb.TxnAction_COMMIT) }()
	<-held
	go func() { again <- tc.end(id, "", pb.TxnAction_COMMIT) }()

	err = tc.end(id, "", pb.TxnAction_ABORT)
	var e *errTxn
	if !errors.As(err, &e) || e.code != pb.ServerError_InvalidTxnStatus ||
		e.msg != "Expect Txn `"+id.String()+"` to be in ABORTING status but it is in COMMITTING status" {
		t.Errorf("abort while it commits: %v", err)
	}
	select {
	case err := <-again:
		t.Fatalf("the commit asked again was answered (%v) before the first ended", err)
	case <-time.After(100 * time.Millisecond):
	}
	tc.endingOn.Store(nil)
	close(release)
	if err := <-first; err != nil {
		t.Errorf("the commit: %v", err)
	}
	if err := <-again; err != nil {
		t.Errorf("the commit asked again: %v", err)
	}
	if err := tc.end(id, "", pb.TxnAction_COMMIT); !errors.As(err, &e) || e.code != pb.ServerError_TransactionNotFound {
		t.Errorf("a commit once it ended: %v", err)
	}
}
