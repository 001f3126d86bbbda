module github.com/cowfs/cowfs

go 1.26.0

require (
	github.com/bluekeyes/go-gitdiff v0.9.0
	github.com/rogpeppe/go-internal v1.16.0
	github.com/sergi/go-diff v1.4.0
	github.com/spf13/afero v1.15.0
	github.com/stretchr/testify v1.12.1
	github.com/tidwall/btree v1.8.2
	github.com/zeebo/blake3 v0.2.4
	golang.org/x/sys v0.49.0
	golang.org/x/tools v0.52.0
)

require (
	github.com/klauspost/cpuid/v2 v2.0.12 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/text v0.28.0 // indirect
)
