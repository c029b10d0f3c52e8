// Package netaddr finds loopback addresses to serve on.
package netaddr

import "net"

// Free is a loopback host:port nothing listens on right now. Another
// process may take it before the caller listens; callers that cannot
// retry check their listen error.
func Free() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
