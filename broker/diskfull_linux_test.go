//go:build linux

package broker_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/streamrun/streamrun/broker"
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
// across a restart), and once space is freed the same producer goes on.
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

	// Space comes back: the same producer goes on.
	if err := os.Remove(filepath.Join(mnt, "filler")); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		m := fmt.Sprintf("after %d", i)
		p.publish(pid, uint64(len(sent)+1+i), msg{payload: m})
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
