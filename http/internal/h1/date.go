package h1

import "time"

// imfLen is the length of an IMF-fixdate (RFC 9110 §5.6.7), such as
// "Sun, 06 Nov 1994 08:49:37 GMT".
const imfLen = 29

// A DateCache holds the IMF-fixdate for the current second, for the Date
// header. It reformats at most once per second of the times it is given.
// The zero value is ready to use.
//
// A DateCache belongs to one event loop: it has no locks and must not be
// used concurrently.
type DateCache struct {
	sec     int64
	valid   bool
	updates int // number of reformats, for tests
	buf     [imfLen]byte
}

// Bytes returns the IMF-fixdate for now, e.g.
// "Sun, 06 Nov 1994 08:49:37 GMT". The result is a view into d, valid
// until a call with a different second.
func (d *DateCache) Bytes(now time.Time) []byte {
	if sec := now.Unix(); !d.valid || sec != d.sec {
		d.format(now.UTC())
		d.sec = sec
		d.valid = true
	}
	return d.buf[:]
}

// Last returns the date the last call to Bytes returned, without looking
// at the time: for a caller that knows the second has not changed (the
// server compares its loop clock). It inlines to a field access.
func (d *DateCache) Last() []byte { return d.buf[:] }

// Append appends the IMF-fixdate for now to dst.
func (d *DateCache) Append(dst []byte, now time.Time) []byte {
	return append(dst, d.Bytes(now)...)
}

const (
	dayNames   = "SunMonTueWedThuFriSat"
	monthNames = "JanFebMarAprMayJunJulAugSepOctNovDec"
)

// format writes t, which must be in UTC, as an IMF-fixdate. Years outside
// 0..9999 cannot be represented and are clamped.
func (d *DateCache) format(t time.Time) {
	d.updates++
	year, month, day := t.Date()
	hh, mm, ss := t.Clock()
	year = max(0, min(year, 9999))
	b := d.buf[:0]
	wd := int(t.Weekday()) * 3
	b = append(b, dayNames[wd:wd+3]...)
	b = append(b, ',', ' ')
	b = append2(b, day)
	b = append(b, ' ')
	m := (int(month) - 1) * 3
	b = append(b, monthNames[m:m+3]...)
	b = append(b, ' ')
	b = append2(b, year/100)
	b = append2(b, year%100)
	b = append(b, ' ')
	b = append2(b, hh)
	b = append(b, ':')
	b = append2(b, mm)
	b = append(b, ':')
	b = append2(b, ss)
	_ = append(b, " GMT"...)
}

// append2 appends n (0..99) as two digits.
func append2(b []byte, n int) []byte {
	return append(b, byte('0'+n/10), byte('0'+n%10))
}
