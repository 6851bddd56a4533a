//go:build !unix

package plugin

import "errors"

// channelFromFD: a host offers the batch channel only on Unix.
func channelFromFD(int) (channelConn, error) {
	return nil, errors.New("no batch channel on this system")
}
