module github.com/streamrun/streamrun

go 1.26

require (
	github.com/klauspost/compress v1.20.4
	github.com/pierrec/lz4/v4 v4.1.33
	google.golang.org/protobuf v1.36.12
)
