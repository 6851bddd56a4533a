// Package functions holds streamrun's side-by-side with Apache Pulsar
// Functions, which scripts/bench-functions runs: the Java Function
// (UppercaseFunction.java, compiled by the script with javac against the
// Pulsar distribution's jars), the Python Function (uppercase_function.py)
// and the pins of the official Python client its instances run with
// (requirements.txt). Both do what the uppercase example handlers do.
//
// Its test runs the script in its short form and checks every field of the
// JSON it writes (schema streamrun.bench-functions/v1); it needs Java,
// Python and the Pulsar distribution, and skips unless
// STREAMRUN_BENCH_FUNCTIONS=1:
//
//	cd bench
//	STREAMRUN_BENCH_FUNCTIONS=1 go test -run BenchFunctions -v ./functions
//
// docs/benchmarks/functions.md has the figures.
package functions
