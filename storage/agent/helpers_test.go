package agent_test

import "os/exec"

func runQuiet(name string, args ...string) error { return exec.Command(name, args...).Run() }
