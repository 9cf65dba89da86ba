package h1

// MethodString returns m as a constant string for the methods of RFC 9110
// and PATCH, and "" for any other, so that a caller that needs the
// method as a string on every request converts (and allocates) only for
// unusual ones.
func MethodString(m []byte) string {
	switch string(m) {
	case "GET":
		return "GET"
	case "HEAD":
		return "HEAD"
	case "POST":
		return "POST"
	case "PUT":
		return "PUT"
	case "DELETE":
		return "DELETE"
	case "PATCH":
		return "PATCH"
	case "OPTIONS":
		return "OPTIONS"
	case "CONNECT":
		return "CONNECT"
	case "TRACE":
		return "TRACE"
	}
	return ""
}
