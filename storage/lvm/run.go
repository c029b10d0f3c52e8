package lvm

import "github.com/strata-gitops/strata/internal/command"

// tools runs lvm2 and the other tools; lvm2 would complain on stderr
// about every descriptor it inherits.
var tools = command.Exec{Env: []string{"LVM_SUPPRESS_FD_WARNINGS=1"}}
