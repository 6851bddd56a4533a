package broker

import (
	"net/http"
	"time"

	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// An Interceptor sees each command a client sends before the broker
// handles it, and may hold it, refuse it or drop its connection: the seam
// where tests inject faults (package broker/faults). A broker without one
// (Options.Intercept nil, the production case) pays one comparison per
// command.
type Interceptor interface {
	// Intercept is called on the connection's read loop with the index of
	// the broker the connection belongs to, the command's kind and a
	// function giving the full name of the topic the command is about (""
	// when none; it costs map lookups, so call it only when needed).
	// ok false lets the command through untouched.
	Intercept(broker int, cmd pb.BaseCommand_Type, topic func() string) (v Verdict, ok bool)
}

// Verdict is what happens to an intercepted command: it waits Delay; then,
// with Drop, the connection is closed; else, with Refuse, the command is
// answered with Err and Message in its own reply shape (LOOKUP_RESPONSE,
// SEND_ERROR, ...; commands without a reply are dropped silently); else it
// is handled normally, only late. With DropAnswer the command is handled,
// then the connection is closed with its answer unsent: the client never
// hears what the broker did (a commit whose answer was lost).
type Verdict struct {
	Delay      time.Duration
	Drop       bool
	DropAnswer bool
	Refuse     bool
	Err        pb.ServerError
	Message    string
}

// intercept applies the interceptor's verdict on cmd, if any. handled
// true: the command was answered or its connection dropped; keep reports
// whether the connection goes on. With DropAnswer it mutes the
// connection's output and returns handled false: the caller handles the
// command, then drops the connection (cn.dropAnswer).
func (cn *conn) intercept(ic Interceptor, cmd *pb.BaseCommand) (handled, keep bool) {
	typ := cmd.GetType()
	v, ok := ic.Intercept(cn.srv.index, typ, func() string { return cn.topicOf(cmd) })
	if !ok {
		return false, true
	}
	if v.Delay > 0 {
		t := time.NewTimer(v.Delay)
		select {
		case <-t.C:
		case <-cn.quit:
			t.Stop()
			return true, false
		}
	}
	switch {
	case v.Drop:
		cn.log.Info("intercepted: dropping the connection", "command", typ.String())
		cn.abort("fault")
		return true, false
	case v.DropAnswer:
		cn.log.Info("intercepted: handling the command, then dropping the connection before its answer", "command", typ.String())
		cn.wmu.Lock()
		cn.wclosed = true // nothing more goes out, the answer included
		cn.wmu.Unlock()
		cn.dropAnswer = true
		return false, true
	case v.Refuse:
		cn.log.Debug("intercepted: answering with an error", "command", typ.String(), "error", v.Err.String())
		cn.answerError(cmd, v.Err, v.Message)
		return true, true
	}
	return false, true
}

// adminRoutes adds Options.AdminRoutes' routes to the admin API's mux,
// each behind the admin API's authentication.
func (c adminAPI) adminRoutes(mux *http.ServeMux) {
	if c.opts.AdminRoutes == nil {
		return
	}
	c.opts.AdminRoutes(c.Cluster, func(pattern string, h http.Handler) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			if !c.adminAuth(w, r) {
				return
			}
			c.log.Debug("admin request", "method", r.Method, "path", r.URL.Path, "query", r.URL.RawQuery)
			h.ServeHTTP(w, r)
		})
	})
}
