// Command clientcpu measures the CPU time a client process spends per
// million messages produced and consumed, streamrun's client (packages
// pool and subscribe) against the official Go client
// (github.com/apache/pulsar-client-go), with the broker in another
// process: the embedded broker (`streamrun broker`, started here as a
// child) and, when -pulsar is given, Apache Pulsar.
//
// Each measurement is a child process of its own (clientcpu measure ...)
// that connects, opens its producer or consumer, and only then reads
// getrusage(RUSAGE_SELF); it reports the user+system CPU time of sending
// -n messages and waiting for every receipt, or of receiving and
// acknowledging -n messages of a backlog, one by one. Both clients get
// the same settings (see the constants) and the same backlog: one that
// streamrun's producer published.
//
// scripts/bench-client-cpu runs it; docs/benchmarks/client-cpu.md has the figures.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"
)

// The same settings for both clients, as in package bench's comparisons:
// batches of up to 1000 messages, 128 KiB, 10 ms; at most 10 000
// messages pending; a receiver queue of 1000; acknowledgements grouped
// up to 1000 or 100 ms (both clients' default).
const (
	batchMessages = 1000
	batchBytes    = 128 << 10
	batchDelay    = 10 * time.Millisecond
	maxPending    = 10000
	receiverQueue = 1000
	ackGroupSize  = 1000
	ackGroupTime  = 100 * time.Millisecond
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "measure" {
		os.Exit(measureMain(os.Args[2:]))
	}
	os.Exit(runMain(os.Args[1:]))
}

// measurement is what one child reports, as one JSON line.
type measurement struct {
	Client     string  `json:"client"` // streamrun or official
	Mode       string  `json:"mode"`   // produce or consume
	Size       int     `json:"size"`
	N          int     `json:"n"`
	CPUSeconds float64 `json:"cpu_seconds"`
	UserSec    float64 `json:"user_seconds"`
	SysSec     float64 `json:"system_seconds"`
	Elapsed    float64 `json:"elapsed_seconds"`
	MaxRSS     int64   `json:"max_rss_bytes"`
}

func (m measurement) cpuPerMillion() float64 { return m.CPUSeconds / float64(m.N) * 1e6 }

func measureMain(args []string) int {
	fs := flag.NewFlagSet("clientcpu measure", flag.ContinueOnError)
	var (
		client = fs.String("client", "", "streamrun or official")
		mode   = fs.String("mode", "", "produce or consume")
		url    = fs.String("url", "", "service URL")
		topic  = fs.String("topic", "", "topic")
		sub    = fs.String("subscription", "", "consume: subscription")
		n      = fs.Int("n", 0, "messages")
		size   = fs.Int("size", 100, "produce: payload bytes")
		prof   = fs.String("cpuprofile", "", "write a CPU profile of the measured part to this file")
		mprof  = fs.String("memprofile", "", "write an allocation profile to this file at the end")
	)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *n < 1 || *url == "" || *topic == "" || (*mode == "consume" && *sub == "") {
		fmt.Fprintln(os.Stderr, "clientcpu measure: -n, -url, -topic (and -subscription to consume) are required")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := newClient(*client)
	if err != nil {
		fmt.Fprintf(os.Stderr, "clientcpu measure: %v\n", err)
		return 2
	}
	var m measurement
	switch *mode {
	case "produce":
		m, err = measureProduce(ctx, c, *url, *topic, *size, *n, *prof)
	case "consume":
		m, err = measureConsume(ctx, c, *url, *topic, *sub, *n, *prof)
	default:
		fmt.Fprintf(os.Stderr, "clientcpu measure: -mode %q: want produce or consume\n", *mode)
		return 2
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "clientcpu measure: %s %s on %s: %v\n", *client, *mode, *topic, err)
		return 1
	}
	m.Client, m.Mode, m.N = *client, *mode, *n
	if *mode == "produce" {
		m.Size = *size
	}
	if *mprof != "" {
		if err := writeHeapProfile(*mprof); err != nil {
			fmt.Fprintf(os.Stderr, "clientcpu measure: -memprofile: %v\n", err)
			return 1
		}
	}
	b, _ := json.Marshal(m)
	fmt.Println(string(b))
	return 0
}
