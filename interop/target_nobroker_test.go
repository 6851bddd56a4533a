//go:build nobroker

package interop

import (
	"context"
	"errors"
	"io"
)

// startEmbedded is what a build with -tags nobroker has: no embedded
// broker compiled in, so only STREAMRUN_INTEROP_TARGET=pulsar works. The
// tag exists for a tree where broker/ does not build.
func startEmbedded(context.Context, int, io.Writer) (*target, func(), error) {
	return nil, nil, errors.New("built with -tags nobroker; set STREAMRUN_INTEROP_TARGET=pulsar")
}
