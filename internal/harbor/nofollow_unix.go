//go:build unix

package harbor

import "syscall"

const oNoFollow = syscall.O_NOFOLLOW
