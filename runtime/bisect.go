package runtime

import (
	"errors"
	"fmt"

	"github.com/streamrun/streamrun/plugin/host"
)

// part is a run of a batch's messages sent together. A batch starts as
// one part; a part that keeps failing without the handler naming a
// message is split in two (see the package doc).
type part struct {
	items []*item
	fails int // failures not pinned on a message
}

// deadLetter is a message given up on, and why.
type deadLetter struct {
	it     *item
	reason string
}

// step is what follows a failure: the parts still to send, first first,
// the messages to dead-letter, and whether the failed part was split (of
// how many messages).
type step struct {
	parts []part
	dead  []deadLetter
	split int
}

// namesMessage reports whether err is a crash that names the message of
// a part of n messages it happened on (a panic while handling it).
func namesMessage(err error, n int) bool {
	var crash *host.CrashError
	return errors.As(err, &crash) && crash.Index >= 0 && crash.Index < n
}

// afterFailure is the poison-message rule: the first of parts failed
// with err, its own failure (it was alone on its instance, or err is a
// panic naming one of its messages), and the handler may fail maxCrashes
// times on a message. A panic that names a
// message strikes that message, which is dead-lettered at maxCrashes
// strikes; any other failure strikes the part, which is split in halves
// at maxCrashes strikes, and a message that fails maxCrashes times alone
// is dead-lettered. It does no I/O: the caller sends, dead-letters and
// logs what it says. It counts strikes in the items and parts, and never
// writes to the items' slices (a batch's own).
func afterFailure(parts []part, err error, maxCrashes int) step {
	cur := &parts[0]
	var crash *host.CrashError
	if namesMessage(err, len(cur.items)) && errors.As(err, &crash) {
		it := cur.items[crash.Index]
		it.crashes++
		if it.crashes < maxCrashes {
			return step{parts: parts}
		}
		cur.items = append(cur.items[:crash.Index:crash.Index], cur.items[crash.Index+1:]...)
		reason := fmt.Sprintf("the handler crashed %d times on it; last: panic: %s", it.crashes, crash.Panic)
		return step{parts: parts, dead: []deadLetter{{it, reason}}}
	}
	cur.fails++
	if cur.fails < maxCrashes {
		return step{parts: parts}
	}
	if len(cur.items) == 1 {
		reason := fmt.Sprintf("the handler failed %d times on it alone; last: %v", cur.fails, err)
		return step{parts: parts[1:], dead: []deadLetter{{cur.items[0], reason}}}
	}
	half := len(cur.items) / 2
	a, z := cur.items[:half:half], cur.items[half:]
	return step{parts: append([]part{{items: a}, {items: z}}, parts[1:]...), split: len(cur.items)}
}
