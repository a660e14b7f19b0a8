# art — see README.md. Targets install what they need (scripts/deps.sh).
GO ?= go
export PATH := $(PATH):/usr/local/go/bin
TEST_TIMEOUT ?= 40m

.PHONY: all build deps demo test vet fuzz bench faults clean

all: build

deps:
	@bash scripts/deps.sh

build: deps
	# Static (no cgo): 4 ms less per command start; os/user then reads
	# /etc/passwd and /etc/group itself, which is all --user needs.
	CGO_ENABLED=0 $(GO) build -o bin/art .

# The main job: a real sandboxed session on a demo workspace, then art log / art diff.
demo: build
	bash scripts/demo.sh

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
	GOARCH=arm64 $(GO) vet ./...

# Every test, as root with real bwrap, FUSE and SQLite; fuzzers run briefly.
# The mount tests run a second time with requests on /dev/fuse instead of
# io_uring (the transport art uses where the kernel lacks io_uring).
test: deps vet
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...
	ART_FUSE_TRANSPORT=classic $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./fuse/
	# The concurrent parts under the race detector (needs cgo): the
	# filesystem, and storing on every CPU (repo, objects), the sandbox.
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./fuse/ ./overlay/ ./repo/ ./objects/ ./sandbox/
	bash scripts/fuzzone_test.sh
	bash scripts/fuzz.sh 5s

fuzz:
	bash scripts/fuzz.sh 60s

# Benchmarks (bench/README.md): art next to git; overlay.sh and trace.sh by hand.
bench: build
	@bash scripts/deps.sh bench
	bash bench/repo.sh

clean:
	rm -rf bin bench/out

# The fault-injection suite (faults/, see README "Reliability"): kill -9 at
# seeded random points, full disks, concurrency, corruption, bad input; the
# whole matrix (make test runs a subset). ART_FAULTS_SEED=N replays a run.
faults: build
	ART_FAULTS=full ART_FAULTS_REPORT=$(CURDIR)/bin/faults-report.json $(GO) test -count=1 -v -timeout 30m ./faults/

# A 30-minute soak of mixed sessions (ART_SOAK_DURATION=5m to shorten); not in CI.
.PHONY: soak
soak: build
	ART_SOAK=1 $(GO) test -count=1 -v -timeout 0 -run '^TestSoak$$' ./faults/
