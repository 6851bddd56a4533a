package streamrun

import (
	"testing"

	"go.uber.org/goleak"
)

// A run starts a host, an embedded broker, plugin processes and input
// readers on goroutines; every one of them ends when the run does.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
