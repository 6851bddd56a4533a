package interop

import (
	"context"
	"io"
	"log/slog"

	"github.com/streamrun/streamrun/broker"
)

// cluster is the in-process embedded broker when that is the target, for
// tests that inject faults; nil for every other target.
var cluster *broker.Cluster

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
	cluster = c
	t := &target{name: "embedded", serviceURL: c.ServiceURL(), adminURL: c.AdminURL()}
	return t, func() { c.Close() }, nil
}
