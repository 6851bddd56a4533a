package host

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/streamrun/streamrun/internal/testkit"
	"github.com/streamrun/streamrun/plugin"
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
