package http

// TimeFormat is the IMF-fixdate layout of RFC 9110 §5.6.7, for use with
// time.Time.Format and time.Parse.
const TimeFormat = "Mon, 02 Jan 2006 15:04:05 GMT"
