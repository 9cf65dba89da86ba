package http

import (
	nethttp "net/http"
	"reflect"
	"testing"
)

// stdHeader gives the same Header net/http's own canonicalization
// would, in three allocations, with value slices a handler may append to.
func TestStdHeaderMatchesNetHTTP(t *testing.T) {
	tests := []struct {
		name   string
		fields []string // name, value pairs
	}{
		{"none", nil},
		{"host only", []string{"host", "example.com"}},
		{"common", []string{"Host", "x", "user-agent", "curl/8", "ACCEPT", "*/*", "content-type", "text/plain"}},
		{"repeated", []string{"X-Forwarded-For", "a", "x-forwarded-for", "b", "Cookie", "c=1", "cookie", "d=2"}},
		{"odd tokens", []string{"x-a_b", "1", "X--Y", "2", "-lead", "3", "a1-b2", "4", "WWW-authenticate", "5", "x-", "6"}},
		{"empty value", []string{"X-Empty", ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var fields []HeaderField
			want := nethttp.Header{}
			for i := 0; i < len(tc.fields); i += 2 {
				fields = append(fields, HeaderField{Name: []byte(tc.fields[i]), Value: []byte(tc.fields[i+1])})
				if k := nethttp.CanonicalHeaderKey(tc.fields[i]); k != "Host" {
					want[k] = append(want[k], tc.fields[i+1])
				}
			}
			var scratch []byte
			got, strs := stdHeader(fields, &scratch, []byte("/target?q"), []byte("host:1"))
			if strs != [2]string{"/target?q", "host:1"} {
				t.Fatalf("extra strings %q", strs)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
			// Appending to one value slice leaves the others alone.
			for k := range got {
				got[k] = append(got[k], "appended")
			}
			for k, vs := range got {
				if vs[len(vs)-1] != "appended" || !reflect.DeepEqual(vs[:len(vs)-1], want[k]) {
					t.Fatalf("after append, %s = %q", k, vs)
				}
			}
		})
	}
}
