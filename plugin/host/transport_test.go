package host

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/streamrun/streamrun/internal/testkit"
	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/plugin/internal/contract"
	"github.com/streamrun/streamrun/plugin/internal/pb"
)

// AutoMTLS: the plugin's socket serves only the host that started it.
func TestAStrangerCannotTalkToAPlugin(t *testing.T) {
	inst := start(t, ClientOptions{Path: example("uppercase")}, `{"output":"o"}`)
	addr := inst.client.ReattachConfig().Addr
	conn, err := grpc.NewClient("unix://"+addr.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = pb.NewHandlerClient(conn).Init(ctx, &pb.InitRequest{ContractVersion: plugin.ContractVersion})
	if err == nil {
		t.Fatal("a client without the host's certificate was served")
	}
	t.Log(err)
	// The host's own connection still works.
	if _, err := inst.Process(context.Background(), msgs("x")); err != nil {
		t.Fatal(err)
	}
}

// The parent-death signal follows the thread that forked the child, not
// the process, and a goroutine that exits while locked to its thread ends
// that thread. Goroutines that do so, on whatever threads the runtime
// gives them, must not take a plugin down.
func TestAPluginOutlivesThreadsThatEnd(t *testing.T) {
	inst := start(t, ClientOptions{Path: example("uppercase")}, `{"output":"o"}`)
	ended := 0
	for range 200 {
		tid := make(chan int)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			tid <- syscall.Gettid()
		}()
		if id := <-tid; id != os.Getpid() { // the main thread is parked, not ended
			testkit.Eventually(t, 10*time.Second, "a locked thread to end", func() bool {
				_, err := os.Stat("/proc/self/task/" + strconv.Itoa(id))
				return errors.Is(err, os.ErrNotExist)
			})
			ended++
		}
	}
	t.Logf("%d threads ended", ended)
	if _, err := inst.Process(context.Background(), msgs("still here")); err != nil || !inst.Alive() {
		t.Fatalf("the plugin died with a thread: %v", err)
	}
}

// A plugin on the SDK gets contract version 5, batches on the batch
// channel, compact answers with state changes and compact windows
// (CompactWindows); capped at version 4, all but the compact windows;
// capped at version 3,
// compact answers; capped at version 2, the batch channel
// and full answers; capped at 1, or one that speaks only version 1 (as
// the Python SDK does), batches on gRPC. All answer.
func TestTheBatchChannelIsNegotiated(t *testing.T) {
	capped := ClientOptions{Path: example("uppercase"), Env: []string{contract.EnvMaxVersion + "=2"}}
	cases := []struct {
		name    string
		opts    ClientOptions
		config  string
		version int
		channel bool
	}{
		{"sdk", ClientOptions{Path: example("uppercase")}, `{"output":"o"}`, contract.VersionCompactWindows, true},
		{"sdk up to version 4", ClientOptions{Path: example("uppercase"), Env: []string{contract.EnvMaxVersion + "=4"}},
			`{"output":"o"}`, contract.VersionCompactState, true},
		{"sdk up to version 3", ClientOptions{Path: example("uppercase"), Env: []string{contract.EnvMaxVersion + "=3"}},
			`{"output":"o"}`, contract.VersionCompactAnswers, true},
		{"sdk up to version 2", capped, `{"output":"o"}`, contract.VersionBatchChannel, true},
		{"sdk up to version 1", ClientOptions{Path: example("uppercase"), Env: []string{contract.EnvMaxVersion + "=1"}},
			`{"output":"o"}`, contract.VersionGRPCBatches, false},
		{"version 1 only", selfPlugin(t, "raw", nil), `{"mode":"ok"}`, contract.VersionGRPCBatches, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			inst := start(t, c.opts, c.config)
			_, onChannel := inst.batches.carrier.(*channelCarrier)
			if inst.version != c.version || onChannel != c.channel {
				t.Fatalf("contract version %d, batch channel %v; want %d, %v", inst.version, onChannel, c.version, c.channel)
			}
			if want := c.version >= contract.VersionCompactWindows; inst.CompactWindows() != want {
				t.Errorf("CompactWindows is %v at contract version %d", !want, c.version)
			}
			if res, err := inst.Process(context.Background(), msgs("a", "b")); err != nil || len(res) != 2 {
				t.Fatalf("%d results, %v", len(res), err)
			}
		})
	}
}

// The batch channel has no name anyone could connect to, and only the
// plugin holds its end: once the plugin is gone, the host reads the end
// of the channel (it would wait for ever if it held a copy of that end).
func TestOnlyThePluginHoldsItsEndOfTheBatchChannel(t *testing.T) {
	inst := start(t, ClientOptions{Path: example("uppercase")}, `{"output":"o"}`)
	ch, ok := inst.batches.carrier.(*channelCarrier)
	if !ok {
		t.Fatalf("batches on %T, not the batch channel", inst.batches.carrier)
	}
	for _, a := range []net.Addr{ch.conn.LocalAddr(), ch.conn.RemoteAddr()} {
		// Go writes an unnamed Unix address as "@"; an abstract one is
		// "@name", a bound one its path.
		if a != nil && a.String() != "" && a.String() != "@" {
			t.Errorf("an end of the batch channel has the name %q", a)
		}
	}
	if err := inst.proc.Kill(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-inst.batches.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the channel did not end with the plugin")
	}
	inst.batches.mu.Lock()
	err := inst.batches.err
	inst.batches.mu.Unlock()
	if !strings.Contains(fmt.Sprint(err), "the plugin ended the batch stream") {
		t.Fatalf("the channel ended with %v, not with its end", err)
	}
}
