package broker_test

import (
	"context"
	"fmt"
	"log"

	"github.com/streamrun/streamrun/broker"
)

// Three brokers in memory on free ports; clients start from ServiceURL and
// are redirected to each topic's owner.
func ExampleStart() {
	c, err := broker.Start(context.Background(), broker.Options{
		Listen:  "127.0.0.1:0",
		HTTP:    "127.0.0.1:0",
		Memory:  true,
		Brokers: 3,
		Logger:  discard(),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	fmt.Println(len(c.BrokerURLs()), "brokers; orders is served by broker", c.OwnerOf("orders"))
	// Output: 3 brokers; orders is served by broker 0
}
