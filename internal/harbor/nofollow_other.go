//go:build !unix

package harbor

const oNoFollow = 0
