module github.com/obol-dev/obol

go 1.26.8

require (
	github.com/valyala/fasthttp v1.74.0
	go.yaml.in/yaml/v3 v3.0.4
	golang.org/x/time v0.16.0
)

require (
	github.com/klauspost/compress v1.20.0 // indirect
	github.com/molecule-man/go-brrr v1.0.1 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
)
