package pool_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
)

func ExampleClient_Publish() {
	ctx := context.Background()
	c, err := pool.New(ctx, pool.Options{
		ServiceURL:       "pulsar://127.0.0.1:6650",
		OperationRetries: pool.OperationRetries{Attempts: 3}, // give up after 3 tries
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)

	// Waits for the receipt (at most the batching delay, 10 ms, plus the
	// broker's answer).
	id, err := c.Publish(ctx, "orders", pool.Message{
		Payload:    []byte(`{"order":17}`),
		Key:        "customer-42", // picks the partition, as Java's client would
		Properties: map[string]string{"source": "web"},
		EventTime:  time.Now(),
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("published as", id)

	// Asynchronously: the callback runs once with the receipt or the error.
	for i := 0; i < 1000; i++ {
		c.PublishAsync(ctx, "orders", pool.Message{Payload: []byte("bulk")}, func(id pulsarwire.MessageID, err error) {
			if err != nil {
				log.Print(err)
			}
		})
	}
	if err := c.Flush(ctx); err != nil {
		log.Fatal(err)
	}
}
