package docker

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tinyELF writes a minimal ELF64 executable header with one program header:
// PT_INTERP (a dynamically linked binary) or PT_LOAD (a static one).
func tinyELF(t *testing.T, interp bool) string {
	t.Helper()
	b := make([]byte, 64+56)
	copy(b, "\x7fELF")
	b[4], b[5], b[6] = 2, 1, 1 // 64-bit, little-endian, version 1
	le := binary.LittleEndian
	le.PutUint16(b[16:], 2)  // ET_EXEC
	le.PutUint16(b[18:], 62) // EM_X86_64
	le.PutUint32(b[20:], 1)  // version
	le.PutUint64(b[32:], 64) // phoff
	le.PutUint16(b[52:], 64) // ehsize
	le.PutUint16(b[54:], 56) // phentsize
	le.PutUint16(b[56:], 1)  // phnum
	le.PutUint16(b[58:], 64) // shentsize
	typ := uint32(1)         // PT_LOAD
	if interp {
		typ = 3 // PT_INTERP
	}
	le.PutUint32(b[64:], typ)
	p := filepath.Join(t.TempDir(), "steward")
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// A dynamically linked steward (plain `go build` with cgo on) cannot run as
// the egress proxy FROM scratch: the image is refused before it is built,
// naming the binary and CGO_ENABLED=0, instead of every allowlist attempt
// erroring with Docker's "exec /steward failed: No such file or directory".
// No daemon is needed: the refusal comes before any Docker call.
func TestRelayImageRefusesADynamicBinary(t *testing.T) {
	dyn := tinyELF(t, true)
	_, err := (&Provider{}).relayImage(context.Background(), dyn)
	if err == nil || !strings.Contains(err.Error(), dyn+" is dynamically linked") || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Fatalf("relayImage(dynamic binary) = %v, want the dynamic-linking refusal naming the binary and CGO_ENABLED=0", err)
	}
	if err := staticBinary(tinyELF(t, false)); err != nil {
		t.Fatalf("staticBinary(static ELF) = %v, want nil", err)
	}
	notELF := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := staticBinary(notELF); err != nil {
		t.Fatalf("staticBinary(not ELF) = %v, want nil (left to the build)", err)
	}
}
