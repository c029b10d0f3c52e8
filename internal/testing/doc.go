// Package testing holds, in its subpackages, test support: a started API
// server, git servers and loop disks (testenv), the whole CSI path on one
// machine (csienv), benchmark summaries (benchstat) and the layering
// check (layering). Nothing outside tests and hack/ imports them.
package testing
