//go:build linux

package broker_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// smallFS mounts a tmpfs of size bytes for the test, or skips when this
// process may not mount (it needs root with CAP_SYS_ADMIN).
func smallFS(t *testing.T, size int) string {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Skipf("cannot mount a small tmpfs for a full disk (%v): this test needs root with CAP_SYS_ADMIN", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// On a full data directory a producer gets SEND_ERROR PersistenceError
// saying the disk is full; every message receipted before is kept (also
// across a restart), and once space is freed the producer, made again,
// goes on.
func TestDiskFullRefusesSendsAndResumes(t *testing.T) {
	mnt := smallFS(t, 4<<20)
	// Leave about 512 KiB for the broker.
	if err := os.WriteFile(filepath.Join(mnt, "filler"), make([]byte, 3<<20+512<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := broker.Options{Listen: "127.0.0.1:0", HTTP: "-", DataDir: filepath.Join(mnt, "data"), Logger: discard()}
	c, err := broker.Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { c.Close() }()
	p := dial(t, c.ServiceURL())
	p.subscribe("full", "keep", pb.CommandSubscribe_Exclusive, earliest)
	pid := p.producer("full")
	body := strings.Repeat("x", 1000)
	var sent []string
	var refusal *pb.CommandSendError
	for seq := uint64(0); seq < 5000 && refusal == nil; seq++ {
		m := fmt.Sprintf("%05d %s", seq, body)
		p.write(sendFrame(pid, seq, msg{payload: m}))
		f := p.expect("receipt or error", func(c *pb.BaseCommand) bool {
			return c.GetType() == pb.BaseCommand_SEND_RECEIPT || c.GetType() == pb.BaseCommand_SEND_ERROR
		})
		if e := f.Cmd.GetSendError(); e != nil {
			refusal = e
			break
		}
		sent = append(sent, m)
	}
	if refusal == nil {
		t.Fatalf("5000 messages of 1 KB fitted in 512 KiB")
	}
	if refusal.GetError() != pb.ServerError_PersistenceError || !strings.Contains(refusal.GetMessage(), "Disk full") {
		t.Fatalf("refusal: %v %q, want PersistenceError saying Disk full", refusal.GetError(), refusal.GetMessage())
	}
	t.Logf("%d messages receipted, then: %v %q", len(sent), refusal.GetError(), refusal.GetMessage())

	// Space comes back. The refused producer stays refused, so that
	// nothing it sent after the refusal lands before what the client
	// resends; the client's producer made again (on a new connection, as
	// clients do after a SEND_ERROR) goes on.
	if err := os.Remove(filepath.Join(mnt, "filler")); err != nil {
		t.Fatal(err)
	}
	p.write(sendFrame(pid, uint64(len(sent)+1), msg{payload: "after the refusal"}))
	if f := p.expect("an error", func(c *pb.BaseCommand) bool {
		return c.GetType() == pb.BaseCommand_SEND_RECEIPT || c.GetType() == pb.BaseCommand_SEND_ERROR
	}); f.Cmd.GetSendError() == nil {
		t.Fatalf("a message of the refused producer was stored after the refusal: %v", f.Cmd)
	}
	p.close()
	p = dial(t, c.ServiceURL())
	pid = p.producer("full")
	for i := range 10 {
		m := fmt.Sprintf("after %d", i)
		p.publish(pid, uint64(len(sent)+i), msg{payload: m})
		sent = append(sent, m)
	}
	p.close()
	// Every receipted message is there, once, in order, also after a restart.
	for _, restart := range []bool{false, true} {
		if restart {
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if c, err = broker.Start(context.Background(), opts); err != nil {
				t.Fatal(err)
			}
		}
		q := dial(t, c.ServiceURL())
		cid := q.subscribe("full", "keep", pb.CommandSubscribe_Exclusive)
		q.flow(cid, uint32(len(sent)+10))
		for i, want := range sent {
			if m := q.receive(cid); m.payload != want {
				t.Fatalf("restart %v: message %d is %.20q, want %.20q", restart, i, m.payload, want)
			}
		}
		q.close()
	}
}

// With streamrun's client, a full disk holds the producer up instead of
// failing it: each SEND_ERROR makes it resend on a new connection, and once
// space is freed every message is published, none lost, in order.
func TestDiskFullHoldsAPoolProducerUntilSpaceReturns(t *testing.T) {
	mnt := smallFS(t, 4<<20)
	filler := filepath.Join(mnt, "filler")
	if err := os.WriteFile(filler, make([]byte, 3<<20+512<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	refusals := &countingLog{want: "append failed"}
	c, err := broker.Start(context.Background(), broker.Options{Listen: "127.0.0.1:0", HTTP: "-", DataDir: filepath.Join(mnt, "data"),
		Logger: slog.New(slog.NewTextHandler(refusals, &slog.HandlerOptions{Level: slog.LevelError}))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := dial(t, c.ServiceURL())
	p.subscribe("full-pool", "keep", pb.CommandSubscribe_Exclusive, earliest)
	p.close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := pool.New(ctx, pool.Options{ServiceURL: c.ServiceURL(), Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close(context.Background())
	const n = 1000 // 1 MB: twice what fits
	var wg sync.WaitGroup
	var failed atomic.Int64
	body := strings.Repeat("x", 1000)
	for i := range n {
		wg.Add(1)
		cl.PublishAsync(ctx, "full-pool", pool.Message{Payload: fmt.Appendf(nil, "%05d %s", i, body)}, func(_ pulsarwire.MessageID, err error) {
			defer wg.Done()
			if err != nil {
				failed.Add(1)
			}
		})
	}
	brokertest.Eventually(t, time.Minute, "the broker refusing sends for a full disk", func() bool { return refusals.n.Load() >= 3 })
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d of %d publishes failed; a full disk must hold them up, not fail them", failed.Load(), n)
	}
	q := dial(t, c.ServiceURL())
	cid := q.subscribe("full-pool", "keep", pb.CommandSubscribe_Exclusive)
	q.flow(cid, n)
	var got []string
	for len(got) < n {
		m := q.receive(cid) // the client batches: an entry may hold many
		if m.batch != nil {
			got = append(got, m.batch...)
		} else {
			got = append(got, m.payload)
		}
	}
	for i, m := range got {
		if want := fmt.Sprintf("%05d ", i); !strings.HasPrefix(m, want) {
			t.Fatalf("message %d is %.10q, want %q...", i, m, want)
		}
	}
	t.Logf("%d messages published through a full disk; the broker refused %d sends meanwhile", n, refusals.n.Load())
}

// countingLog counts log lines holding want.
type countingLog struct {
	want string
	n    atomic.Int64
}

func (l *countingLog) Write(p []byte) (int, error) {
	if strings.Contains(string(p), l.want) {
		l.n.Add(1)
	}
	return len(p), nil
}
