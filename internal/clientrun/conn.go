package clientrun

import (
	"context"
	"time"

	"github.com/streamrun/streamrun/pool"
)

// Conn is how a command connects to its broker and lets go of it.
type Conn struct {
	// Client is the connection pool's options. Required: its ServiceURL
	// at least (pool.Options states the defaults of the rest).
	Client pool.Options
	// ConnectTimeout bounds connecting, retries included. Required.
	ConnectTimeout time.Duration
	// CloseTimeout bounds closing at the end, whether or not ctx ended
	// (for Produce, the wait for the last receipts too). Required.
	CloseTimeout time.Duration
}

// connect opens the client within ConnectTimeout.
func (c Conn) connect(ctx context.Context) (*pool.Client, error) {
	cctx, cancel := context.WithTimeout(ctx, c.ConnectTimeout)
	defer cancel()
	return pool.New(cctx, c.Client)
}

// closing is a context for closing within CloseTimeout, ctx's end or
// not: what was sent is waited for, what is open is let go of cleanly.
func (c Conn) closing(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), c.CloseTimeout)
}
