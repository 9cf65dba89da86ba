module github.com/veloq/veloq

go 1.26.0

require golang.org/x/sys v0.49.0

require github.com/valyala/bytebufferpool v1.0.0 // indirect
