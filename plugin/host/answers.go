package host

import (
	"sync"

	"github.com/streamrun/streamrun/plugin"
)

// answerArrays keeps the arrays that answers are converted into
// (Instance.Process's results and the echoed outputs of contract version
// 3) for use again once the caller hands them back (Instance.Recycle):
// a batch then costs the host no new arrays, and its garbage collector
// nothing to sweep for them. What a caller keeps it keeps: arrays not
// handed back are never reused.
type answerArrays struct {
	mu    sync.Mutex
	lent  []lentArrays // handed to callers, the newest last
	spare []lentArrays // handed back, cleared
}

// lentArrays are the arrays of one answer.
type lentArrays struct {
	res    []plugin.Result
	echoes []plugin.Output
	// changes are the state changes of contract version 4's compact
	// answers.
	changes []plugin.StateChange
}

// Bounds: lent entries past maxLent are forgotten (the oldest first; a
// caller that never recycles pins no more than that), and no more than
// maxSpare arrays wait for a batch.
const (
	maxLent  = 16
	maxSpare = 4
)

// get returns arrays for an answer to n messages, echoes too when
// withEchoes, changes too when withChanges, and remembers them as lent.
func (a *answerArrays) get(n int, withEchoes, withChanges bool) lentArrays {
	a.mu.Lock()
	defer a.mu.Unlock()
	var l lentArrays
	for k := len(a.spare) - 1; k >= 0; k-- {
		if cap(a.spare[k].res) >= n {
			l = a.spare[k]
			a.spare = append(a.spare[:k], a.spare[k+1:]...)
			break
		}
	}
	if l.res == nil {
		l.res = make([]plugin.Result, n)
	}
	l.res = l.res[:n]
	if withEchoes {
		if cap(l.echoes) < n {
			l.echoes = make([]plugin.Output, n)
		}
		l.echoes = l.echoes[:n]
	}
	if withChanges {
		if cap(l.changes) < n {
			l.changes = make([]plugin.StateChange, n)
		}
		l.changes = l.changes[:n]
	}
	if len(a.lent) == maxLent {
		a.lent = append(a.lent[:0], a.lent[1:]...)
	}
	a.lent = append(a.lent, l)
	return l
}

// recycle takes back res, if it is the results array of a lent answer.
func (a *answerArrays) recycle(res []plugin.Result) {
	if cap(res) == 0 {
		return
	}
	first := &res[:1][0]
	a.mu.Lock()
	defer a.mu.Unlock()
	for k := range a.lent {
		if &a.lent[k].res[:1][0] != first {
			continue
		}
		l := a.lent[k]
		a.lent = append(a.lent[:k], a.lent[k+1:]...)
		if len(a.spare) < maxSpare {
			// Cleared, so that nothing they held is kept alive here.
			clear(l.res[:cap(l.res)])
			clear(l.echoes[:cap(l.echoes)])
			clear(l.changes[:cap(l.changes)])
			a.spare = append(a.spare, l)
		}
		return
	}
}
