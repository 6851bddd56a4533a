package control

import (
	"context"
	"time"

	"github.com/streamrun/streamrun"
)

// ForRun serves run's control API as its files' control section says,
// with addr ("" for none) in place of its control.http and readOnly
// added to its read_only: what `streamrun run --control` does. It
// returns nil and no error when neither asks for it. Close the server
// (Server.Close, nil-safe through CloseQuietly) once the run has ended.
func ForRun(run *streamrun.Run, addr string, readOnly bool, lookupEnv func(string) (string, bool), o Options) (*Server, error) {
	fo, err := FromFile(run.Files().Control(), lookupEnv)
	if err != nil {
		return nil, err
	}
	if addr != "" {
		fo.Addr = addr
	}
	if fo.Addr == "" {
		return nil, nil
	}
	fo.ReadOnly = fo.ReadOnly || readOnly
	fo.RateInterval, fo.TapMaxRate, fo.TapMaxPayload, fo.Logger = o.RateInterval, o.TapMaxRate, o.TapMaxPayload, o.Logger
	return Serve(run, fo)
}

// CloseQuietly closes s, when there is one, giving requests under way
// a few seconds.
func (s *Server) CloseQuietly() {
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.Close(ctx)
}
