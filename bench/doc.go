// Package bench compares streamrun's producer (package pool) with the
// official Go client, github.com/apache/pulsar-client-go, on the same
// broker in the same run, with the same batching settings (1000 messages,
// 128 KiB, 10 ms) and pending limit (10 000 messages).
//
// It is a module of its own so that the official client and its
// dependencies stay out of streamrun's go.mod.
//
//	cd bench
//	STREAMRUN_BENCH=1 go test -run Compare -v          # ratios, embedded broker in process
//	STREAMRUN_BENCH=1 STREAMRUN_BENCH_BROKER=subprocess go test -run Compare -v
//	                                                   # broker in a child: client-only allocations
//	STREAMRUN_BENCH=1 STREAMRUN_PULSAR_URL=pulsar://127.0.0.1:6650 go test -run Compare -v
//	go test -run '^$' -bench Producer -benchtime 200000x
package bench
