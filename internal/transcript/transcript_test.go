package transcript

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestEncodeDecode(t *testing.T) {
	in := &Transcript{Mode: ModeFull, Truncated: "cap", Calls: []Call{{
		Time: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), Method: "POST", Route: "/v1/messages", Status: 200,
		Tries: []Try{{Status: 429}, {Status: 200, Wait: time.Second}}, Request: json.RawMessage(`{"model":"m"}`),
	}}}
	blob, err := Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Decode(blob)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(in)
	b, _ := json.Marshal(out)
	if !bytes.Equal(a, b) {
		t.Errorf("round trip:\n%s\n%s", a, b)
	}
	if !ValidMode("metadata") || ValidMode("some") {
		t.Error("ValidMode")
	}
}

// A blob that inflates past MaxDecoded (a gzip bomb in a copied record) is refused.
func TestDecodeBounded(t *testing.T) {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(`{"mode":"full","calls":[],"truncated":"`))
	chunk := []byte(strings.Repeat("x", 1<<20))
	for i := 0; i <= MaxDecoded>>20; i++ {
		zw.Write(chunk)
	}
	zw.Write([]byte(`"}`))
	zw.Close()
	if _, err := Decode(b.Bytes()); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("decode of a %d-byte bomb: %v", b.Len(), err)
	}
	if _, err := Decode([]byte("not gzip")); err == nil {
		t.Error("garbage decoded")
	}
}
