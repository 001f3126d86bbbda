module example.com/vary

go 1.26.0

require (
	github.com/cowfs/cowfs v0.0.0-00010101000000-000000000000
	github.com/spf13/afero v1.15.0
)

require (
	github.com/klauspost/cpuid/v2 v2.0.12 // indirect
	github.com/sergi/go-diff v1.4.0 // indirect
	github.com/tidwall/btree v1.8.2 // indirect
	github.com/zeebo/blake3 v0.2.4 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.28.0 // indirect
	golang.org/x/tools v0.52.0 // indirect
)

replace github.com/cowfs/cowfs => ../..
