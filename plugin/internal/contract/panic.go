package contract

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/streamrun/streamrun/plugin/internal/pb"
)

// A handler's panic reaches the host as a gRPC status Aborted whose detail
// is a pb.Panic (on Init and Close), or as the Panic field of a batch's
// answer, which the host turns into that same status, so that one place
// (the host's error classification) reads both.

// PanicStatus is the status error that carries p.
func PanicStatus(p *pb.Panic) error {
	st := status.New(codes.Aborted, "handler panicked: "+p.Value)
	if d, err := st.WithDetails(p); err == nil {
		st = d
	}
	return st.Err()
}

// PanicDetail is the pb.Panic st carries, nil when it carries none.
func PanicDetail(st *status.Status) *pb.Panic {
	for _, d := range st.Details() {
		if p, ok := d.(*pb.Panic); ok {
			return p
		}
	}
	return nil
}
