package store

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// crashChildEnv, when set, makes the test binary a crash child: TestMain
// calls crashChild instead of running tests.
const crashChildEnv = "STREAMRUN_STORE_CRASH_DIR"

// crashChild appends entries without end, printing "id N" after each Append
// returns and "cursor N" after each SaveCursor returns, until it is killed.
func crashChild() {
	s, err := Open(Options{Dir: os.Getenv(crashChildEnv), SegmentBytes: 64 << 10})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	l, err := s.Topic(tname)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	out := os.Stdout // unbuffered: a line is printed only after its Append returned
	// Ids go on from what earlier children left, and entry i's data is
	// payload(i), so the parent can check every entry.
	for i := l.Next(); i < 10_000_000; i++ {
		id, err := l.Append(int64(1000+i), payload(i))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Fprintf(out, "id %d\n", id)
		if id%100 == 99 {
			if err := l.SaveCursor("sub", strconv.AppendUint(nil, id, 10)); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			fmt.Fprintf(out, "cursor %d\n", id)
		}
	}
	os.Exit(3) // the parent kills it long before this
}

// A child appends and reports each id once Append returned; the parent kills
// it with SIGKILL mid-stream, then every reported id must be on disk.
func TestKill9KeepsEveryAppendedEntry(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("needs SIGKILL")
	}
	dir := t.TempDir()
	for round := range 3 { // each round starts from what the last kill left
		var stderr bytes.Buffer
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		must(t, err)
		must(t, cmd.Start())

		// Kill a few thousand entries in, at a moment set by the parent's
		// scheduling, not by the child: it keeps appending meanwhile.
		killAt := int64(2000 * (round + 1))
		var lastID, lastCursor int64 = -1, -1
		killed := false
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			kind, num, _ := strings.Cut(sc.Text(), " ")
			n, err := strconv.ParseInt(num, 10, 64)
			if err != nil {
				t.Fatalf("child printed %q", sc.Text())
			}
			switch kind {
			case "id":
				lastID = n
			case "cursor":
				lastCursor = n
			}
			if !killed && lastID >= killAt {
				must(t, cmd.Process.Kill()) // SIGKILL
				killed = true
			}
		}
		err = cmd.Wait()
		if !killed {
			t.Fatalf("child ended before it was killed: %v\n%s", err, stderr.String())
		}
		if ws, ok := cmd.ProcessState.Sys().(interface{ Signaled() bool }); ok && !ws.Signaled() {
			t.Fatalf("child was not killed by a signal: %v\n%s", err, stderr.String())
		}

		s, err := Open(Options{Dir: dir, SegmentBytes: 64 << 10})
		must(t, err)
		l, err := s.Topic(tname)
		must(t, err)
		if l.Next() < uint64(lastID+1) {
			t.Fatalf("round %d: child reported id %d, log has Next() = %d", round, lastID, l.Next())
		}
		checkEntries(t, l, 0, l.Next(), 500)
		curs, err := l.Cursors()
		must(t, err)
		if got, _ := strconv.ParseInt(string(curs["sub"]), 10, 64); lastCursor >= 0 && got < lastCursor {
			t.Fatalf("round %d: cursor %q, child reported saving %d", round, curs["sub"], lastCursor)
		}
		t.Logf("round %d: killed after id %d reported, %d entries on disk", round, lastID, l.Next())
		must(t, s.Close())
	}
}
