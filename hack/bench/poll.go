package main

import "time"

// poll calls try every interval until it returns nil or limit has passed,
// and returns try's last error. The bench waits on processes it cannot be
// told about (a controller's metrics, an API server's admission chain), so
// it asks again rather than sleeping a guessed time.
func poll(limit, interval time.Duration, try func() error) error {
	deadline := time.Now().Add(limit)
	for {
		err := try()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(interval)
	}
}
