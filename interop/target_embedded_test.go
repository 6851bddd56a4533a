//go:build !nobroker

package interop

import (
	"context"
	"io"
	"log/slog"

	"github.com/streamrun/streamrun/broker"
)

// startEmbedded starts streamrun's broker in this process, in memory, on
// free loopback ports.
func startEmbedded(ctx context.Context, brokers int, log io.Writer) (*target, func(), error) {
	c, err := broker.Start(ctx, broker.Options{
		Listen:  "127.0.0.1:0",
		HTTP:    "127.0.0.1:0",
		Memory:  true,
		Brokers: brokers,
		Logger:  slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		return nil, nil, err
	}
	t := &target{name: "embedded", serviceURL: c.ServiceURL(), adminURL: c.AdminURL()}
	return t, func() { c.Close() }, nil
}
