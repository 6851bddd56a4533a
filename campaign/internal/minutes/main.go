// Command minutes prints a Go duration rounded up to whole minutes, for
// scripts/campaign's test timeout.
package main

import (
	"fmt"
	"os"
	"time"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: minutes DURATION")
		os.Exit(2)
	}
	d, err := time.ParseDuration(os.Args[1])
	if err != nil || d <= 0 {
		fmt.Fprintf(os.Stderr, "minutes: %q: want a positive Go duration\n", os.Args[1])
		os.Exit(2)
	}
	fmt.Println(int((d + time.Minute - 1) / time.Minute))
}
