package http

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseRange(t *testing.T) {
	const size = 1000
	for _, tc := range []struct {
		in   string
		want []byteRange
		err  error
	}{
		{"", nil, nil},
		{"bytes=0-0", []byteRange{{0, 1}}, nil},
		{"bytes=0-999", []byteRange{{0, 1000}}, nil},
		{"bytes=0-5000", []byteRange{{0, 1000}}, nil}, // clipped to the end
		{"bytes=990-", []byteRange{{990, 10}}, nil},
		{"bytes=-10", []byteRange{{990, 10}}, nil},
		{"bytes=-5000", []byteRange{{0, 1000}}, nil}, // a suffix longer than the file
		{"bytes= 1-2 , 5-6", []byteRange{{1, 2}, {5, 2}}, nil},
		{"bytes=1-2,,5-6", []byteRange{{1, 2}, {5, 2}}, nil},
		{"bytes=1000-", nil, errNoOverlap},
		{"bytes=5000-6000,2000-", nil, errNoOverlap},
		{"bytes=5000-6000,0-1", []byteRange{{0, 2}}, nil}, // the one that overlaps stays
		{"bytes=-0", nil, errNoOverlap},
		{"bytes=5-1", nil, errBadRange},
		{"bytes=a-1", nil, errBadRange},
		{"bytes=1", nil, errBadRange},
		{"bytes=--1", nil, errBadRange},
		{"bytes=-1-2", nil, errBadRange},
		{"items=1-2", nil, errBadRange},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseRange(tc.in, size)
			require.ErrorIs(t, err, tc.err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestMatchList(t *testing.T) {
	for _, tc := range []struct {
		list, etag string
		strong     bool
		want       condResult
	}{
		{`"a"`, `"a"`, true, condTrue},
		{`"a"`, `W/"a"`, true, condFalse}, // a weak tag never matches strongly
		{`W/"a"`, `"a"`, false, condTrue},
		{`"x", W/"a"`, `"a"`, false, condTrue},
		{`*`, `"a"`, true, condTrue},
		{`"b"`, `"a"`, false, condFalse},
		{`garbage`, `"a"`, false, condFalse},
	} {
		require.Equal(t, tc.want, matchList(tc.list, tc.etag, tc.strong), "%s vs %s strong=%v", tc.list, tc.etag, tc.strong)
	}
}

// FuzzParseRange checks parseRange's contract on any field value and file
// size: a nil result only for an empty field; otherwise ranges that are
// non-empty and inside the file, no more than the field names, or one of
// the two sentinel errors; and the ranges, written back as a Range field,
// parse to themselves.
func FuzzParseRange(f *testing.F) {
	for _, s := range []string{"", "bytes=0-0", "bytes=0-5000", "bytes=-10", "bytes= 1-2 , 5-6", "bytes=1-2,,5-6",
		"bytes=5000-6000,0-1", "bytes=-0", "bytes=5-1", "bytes=--1", "bytes=-1-2", "items=1-2", "bytes=0-,0-,-9223372036854775807"} {
		f.Add(s, int64(1000))
		f.Add(s, int64(0))
	}
	f.Fuzz(func(t *testing.T, s string, size int64) {
		if size < 0 {
			size = -(size + 1) // a file size is not negative
		}
		ranges, err := parseRange(s, size)
		if err != nil {
			if ranges != nil || !errors.Is(err, errBadRange) && !errors.Is(err, errNoOverlap) {
				t.Fatalf("parseRange(%q, %d) = %v, %v", s, size, ranges, err)
			}
			return
		}
		if s == "" {
			if ranges != nil {
				t.Fatalf("parseRange(%q) = %v for an empty field", s, ranges)
			}
			return
		}
		if len(ranges) == 0 || len(ranges) > strings.Count(s, ",")+1 {
			t.Fatalf("parseRange(%q, %d): %d ranges", s, size, len(ranges))
		}
		field := "bytes="
		for i, r := range ranges {
			if r.start < 0 || r.length <= 0 || r.start >= size || r.length > size-r.start {
				t.Fatalf("parseRange(%q, %d): range %d %+v outside the file", s, size, i, r)
			}
			if i > 0 {
				field += ","
			}
			field += strconv.FormatInt(r.start, 10) + "-" + strconv.FormatInt(r.start+r.length-1, 10)
		}
		again, err := parseRange(field, size)
		if err != nil || !slices.Equal(again, ranges) {
			t.Fatalf("parseRange(%q, %d) = %v; written back as %q it parses to %v, %v", s, size, ranges, field, again, err)
		}
	})
}
