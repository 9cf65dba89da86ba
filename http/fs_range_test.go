package http

import (
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
