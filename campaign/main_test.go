package campaign_test

import (
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/streamrun/streamrun/plugin"
)

// roleEnv chooses the part the test binary plays: the tests (unset) or
// the chaos handler plugin ("chaos"), which the hosts start.
const roleEnv = "STREAMRUN_CAMPAIGN_ROLE"

// streamrunBin is the streamrun command built by TestMain when a campaign
// runs; the broker and the hosts are processes of it.
var streamrunBin string

func TestMain(m *testing.M) {
	if os.Getenv(roleEnv) == "chaos" {
		// Shared pipelines send two batches at once; the chaos handler
		// keeps no state between batches.
		plugin.ServeWithOptions(plugin.Configure(newChaos), plugin.ServeOptions{Concurrency: 2})
		return
	}
	var dir string
	if os.Getenv(campaignEnv) != "" || os.Getenv(pulsarKillEnv) != "" {
		var err error
		if dir, err = os.MkdirTemp("", "streamrun-campaign-bin-"); err != nil {
			log.Fatal(err)
		}
		streamrunBin = filepath.Join(dir, "streamrun")
		// The faultapi tag: the campaign's broker serves the fault API
		// (--fault-api), which release builds leave out.
		cmd := exec.Command("go", "build", "-tags", "faultapi", "-o", streamrunBin, "github.com/streamrun/streamrun/cmd/streamrun")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			log.Fatalf("campaign: build streamrun: %v", err)
		}
	}
	code := m.Run()
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
