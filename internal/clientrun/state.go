package clientrun

import (
	"context"
	"fmt"

	"github.com/streamrun/streamrun/runtime"
)

// State reads the keyed state kept in changelog over a connection of its
// own, as `streamrun state` does: runtime.ReadState, which the running
// hosts do not notice.
func State(ctx context.Context, c Conn, changelog string) (map[string][]byte, error) {
	client, err := c.connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", c.Client.ServiceURL, err)
	}
	defer func() {
		cctx, cancel := c.closing(ctx)
		defer cancel()
		_ = client.Close(cctx)
	}()
	return runtime.ReadState(ctx, client, changelog)
}
