package domain

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkUnstorableJSON measures the edge's text check on a typical
// submit body (a 1 KiB payload of strings and numbers).
func BenchmarkUnstorableJSON(b *testing.B) {
	var fields []string
	for i := range 20 {
		fields = append(fields, fmt.Sprintf(`"field_%d":"some text of a caller, %d","n_%d":%d.5`, i, i, i, i*1000))
	}
	body := []byte(`{"capability":"doc:parse","payload":{` + strings.Join(fields, ",") + `}}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, bad := UnstorableJSON(body); bad {
			b.Fatal("a clean body is refused")
		}
	}
}
