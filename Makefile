# fencegate — see README.md.
GO      ?= go
BIN     ?= bin/gateway
PKGS    ?= ./...

.PHONY: mutants all build test clients conformance test-short lint fuzz bench soak screenshot scenarios sim clean torture

all: build

## build: the gateway binary, in bin/ (-buildvcs: `gateway version` names the commit, whatever GOFLAGS says)
build:
	CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=auto -o $(BIN) ./cmd/gateway

## test: every test, with the race detector (CI=true makes missing programs fail instead of skip); the Python and
##       Node-RED clients' tests and the pause test across languages run in it (package conformance), after make clients.
##       With -trimpath, as make mutants builds (and the go builds the tests run inherit it through GOFLAGS): the
##       packages compiled here are in the build cache for the mutants, which then compile only what each one changes
test: clients
	FENCEGATE_PAHO2=$(PAHO2_PATH) GOFLAGS="$(strip $(GOFLAGS) -trimpath)" $(GO) test -race -count=1 -timeout 25m $(PKGS)

## clients: what the Python and Node-RED clients' tests need besides Debian's python3-paho-mqtt, python3-cryptography,
##          nodejs and npm: the Node-RED package's npm dependencies (npm ci in node-red/), and paho-mqtt 2 from Debian 13's
##          package, unpacked in the user's cache (the Python package is tested with Debian 12's paho-mqtt 1.6 and with 2).
##          Without npm or the network it says so, and those tests skip (under CI=true they fail).
PAHO2_DEB    = python3-paho-mqtt_2.1.0-1_all.deb
PAHO2_URL    = http://deb.debian.org/debian/pool/main/p/python-paho-mqtt/$(PAHO2_DEB)
PAHO2_SHA256 = 09114c747bb5ff165d0da0bcd7676ef316d943fd64703af3e8476fbfd23d5af7
PAHO2_DIR   ?= $(HOME)/.cache/fencegate/paho2
PAHO2_PATH   = $(PAHO2_DIR)/usr/lib/python3/dist-packages
clients:
	@if ! command -v npm >/dev/null; then echo "clients: npm is not installed (apt-get install nodejs npm): the Node-RED tests skip"; \
	elif [ ! -f node-red/node_modules/.package-lock.json ] || [ node-red/package-lock.json -nt node-red/node_modules/.package-lock.json ]; then \
	  echo "clients: npm ci in node-red/"; (cd node-red && npm ci --no-audit --no-fund --loglevel=error) || [ "$$CI" != true ]; fi
	@if [ ! -f $(PAHO2_PATH)/paho/mqtt/enums.py ]; then \
	  echo "clients: paho-mqtt 2 from $(PAHO2_URL)"; mkdir -p $(PAHO2_DIR) && \
	  curl -fsSL -o $(PAHO2_DIR)/$(PAHO2_DEB) $(PAHO2_URL) && \
	  echo "$(PAHO2_SHA256)  $(PAHO2_DIR)/$(PAHO2_DEB)" | sha256sum -c --quiet && \
	  dpkg-deb -x $(PAHO2_DIR)/$(PAHO2_DEB) $(PAHO2_DIR) || { echo "clients: paho-mqtt 2 not unpacked: the Python tests with it skip"; [ "$$CI" != true ]; }; fi

## conformance: the behavioural scenarios for the Go, Python and Node-RED controllers (lease lost, fence above every
##              revision, gateway offline), then the pause test across languages, 20 times per pair (make test runs it 3
##              times per pair), and its table; FENCEGATE_CONFORMANCE_REPS=N sets the repetitions
conformance: clients
	FENCEGATE_CONFORMANCE_REPS=$${FENCEGATE_CONFORMANCE_REPS:-20} $(GO) test -count=1 -v -timeout 30m -run '^(TestBehaviour|TestPause)$$' ./conformance

## torture: the crash torture (tests/torture) with 50 gateway stops (FENCEGATE_TORTURE_CYCLES), checked after each
##          and, at the end, its whole history with porcupine; it prints its seed, FENCEGATE_TORTURE_SEED=N replays it;
##          a failed run leaves its logs and the history's visualization in FENCEGATE_TORTURE_OUT (default: the
##          temporary directory)
torture:
	FENCEGATE_TORTURE_CYCLES=$${FENCEGATE_TORTURE_CYCLES:-50} $(GO) test -count=1 -v -timeout 30m -run '^TestTorture$$' ./tests/torture

## test-short: the tests without the race detector, faster on a laptop
test-short:
	$(GO) test -count=1 $(PKGS)

## lint: gofmt -s and go vet, both must be clean
lint:
	@out=$$(gofmt -s -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt -s would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) vet -tags failpoints ./cmd/gateway
	$(GO) vet -tags nosim ./cmd/gateway
	$(GO) vet -tags imagetest ./piimage

## fuzz: a short run (FUZZTIME) of each fuzz target: the command decoder, the topic parser, the configuration
##       loader, the card's bridge and Wi-Fi files; their seed corpora (testdata/fuzz) run with every go test. A failure writes its input there. Then the
##       hostile commands through the real brokers (TestHostileCommands) with HOSTILE_CASES cases per broker (make test:
##       1000); it prints its seed, FENCEGATE_HOSTILE_SEED=N replays it.
FUZZTIME      ?= 5s
FUZZ          ?= ./wire:FuzzDecodeCommand ./wire:FuzzTopics ./config:FuzzParse ./sitebridge:FuzzParse ./wifi:FuzzParse
HOSTILE_CASES ?= 10000
fuzz:
	@for t in $(FUZZ); do \
	  echo "fuzz $$t for $(FUZZTIME)"; \
	  $(GO) test $${t%%:*} -run '^$$' -fuzz "^$${t#*:}\$$" -fuzztime $(FUZZTIME) || exit 1; \
	done
	FENCEGATE_HOSTILE_CASES=$(HOSTILE_CASES) $(GO) test -count=1 -timeout 20m -run '^TestHostileCommands$$' ./service

## bench: the Go benchmarks with allocations (the command decoder and answer encoder; admission and the fence store against
##        the disk's commit floor; commands against the broker's own round trip), then gateway bench, every profile, from a
##        failpoints build (bin/gateway-bench), which alone can slow its store for the sdcard profile. BENCH_FLAGS adds flags
##        (e.g. --json, --store-dir DIR on the disk to measure); see docs/performance.md
BENCH_FLAGS ?=
bench:
	$(GO) test ./wire ./fencelog ./service -run '^$$' -bench . -benchmem -benchtime 2s
	CGO_ENABLED=0 $(GO) build -trimpath -tags failpoints -o bin/gateway-bench ./cmd/gateway
	bin/gateway-bench bench $(BENCH_FLAGS)

## soak: gateway bench --profile soak, 10 minutes (not in make test): 16 controllers keep commands in flight, stale and
##       duplicate ones among them, reconnecting, with event streams coming and going, while the gateway's goroutines,
##       heap and RSS are sampled every 10 s; it fails (exit 1) if they grew. SOAK_FLAGS adds flags (e.g. --duration 1h,
##       --json); see docs/performance.md
SOAK_FLAGS ?=
soak: build
	$(BIN) bench --profile soak $(SOAK_FLAGS)

## screenshot: refresh docs/dashboard.png from the browser test, once its scenarios have played
##             (needs chromium; CI=true: without it the test fails instead of skipping, and nothing is saved)
screenshot:
	CI=true FENCEGATE_SCREENSHOT=$(CURDIR)/docs/dashboard.png $(GO) test ./cmd/gateway -run '^TestDashboardInBrowser$$' -count=1

## scenarios: play every simulator scenario (the binary lists them) on its own simulator
scenarios: build
	@names=$$($(BIN) sim scenario --list) || exit 1; \
	for s in $$names; do \
	  echo "$(BIN) sim scenario $$s --sim http://127.0.0.1:1 --delay 0"; \
	  $(BIN) sim scenario $$s --sim http://127.0.0.1:1 --delay 0 || exit 1; done

## mutants: deliberately broken variants of the safety core; the tests must catch each one on every run
##          (each mutant's tests run 3 times, the lock mutants 10, two mutants at a time); prints caught/run per
##          mutant and the total time. FENCEGATE_MUTANTS_ONLY=REGEXP picks mutants, FENCEGATE_MUTANT_RUNS=N the runs.
mutants:
	FENCEGATE_MUTANTS=1 $(GO) test -count=1 -v -parallel 2 -timeout 60m ./tests/mutants

## sim: the simulator with an embedded broker (MQTT on 127.0.0.1:1883, API on 127.0.0.1:8080), from bin/gateway, which
##      it builds first (not go run: go run exits 1 when interrupted, whatever the program's status); SIM_FLAGS adds flags
SIM_FLAGS ?=
sim: build
	$(BIN) sim $(SIM_FLAGS)

clean:
	rm -rf bin

## dist: static binaries for the Raspberry Pi in dist/ (arm64; armv7; armv6 for the Zero and 1) with dist/SHA256SUMS,
##       built without the simulator (-tags nosim); make build and make sim keep it
## deb: .deb packages for arm64 and armhf (built for ARMv6: runs on every Pi) in dist/; see docs/packaging.md
##      (DEB_ARCHS=arm64 builds one)
.PHONY: dist deb
DIST           ?= dist
VERSION        ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-unknown)
DEB_VERSION    ?= $(shell sh packaging/debversion.sh '$(VERSION)')
DEB_MAINTAINER ?= fencegate maintainers <fencegate@users.noreply.github.com>
# nfpm runs from the module proxy at a pinned version, so its dependencies stay out of go.mod.
NFPM_VERSION   ?= v2.45.2
NFPM           ?= $(GO) run github.com/goreleaser/nfpm/v2/cmd/nfpm@$(NFPM_VERSION)
# The packages' file dates: the commit's, so that a rebuild of a commit gives the same .deb.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null)
# -buildvcs: `gateway version` reports the commit (GOFLAGS may say -buildvcs=false).
# -tags nosim: the Pi binaries have no `gateway sim` (no embedded broker, simulator or scenarios; about 1.4 MB less).
DIST_FLAGS     ?= -trimpath -buildvcs=auto -tags nosim -ldflags "-s -w"

# DIST_BINS picks the binaries (make image builds arm64 alone); the packages need arm64 and armv6.
DIST_BINS      ?= arm64 armv7 armv6
dist:
	mkdir -p $(DIST)
	rm -f $(DIST)/gateway-linux-* $(DIST)/fencegate_*.deb $(DIST)/SHA256SUMS
	@for b in $(DIST_BINS); do \
	  case $$b in arm64) arch="GOARCH=arm64";; armv7) arch="GOARCH=arm GOARM=7";; armv6) arch="GOARCH=arm GOARM=6";; \
	    *) echo "DIST_BINS: $$b: want arm64, armv7 or armv6"; exit 1;; esac; \
	  echo "CGO_ENABLED=0 GOOS=linux $$arch $(GO) build $(DIST_FLAGS) -o $(DIST)/gateway-linux-$$b ./cmd/gateway"; \
	  env CGO_ENABLED=0 GOOS=linux $$arch $(GO) build $(DIST_FLAGS) -o $(DIST)/gateway-linux-$$b ./cmd/gateway || exit 1; \
	done
	cd $(DIST) && sha256sum $(addprefix gateway-linux-,$(DIST_BINS)) > SHA256SUMS

DEB_ARCHS      ?= arm64 armhf
deb: dist
	@v='$(DEB_VERSION)'; test -n "$$v" || { echo "no Debian version for VERSION=$(VERSION)"; exit 1; }; \
	for arch in $(DEB_ARCHS); do \
	  case $$arch in arm64) bin=arm64;; armhf) bin=armv6;; *) echo "DEB_ARCHS: $$arch: want arm64 or armhf"; exit 1;; esac; \
	  echo "nfpm: $(DIST)/fencegate_$${v}_$${arch}.deb"; \
	  FENCEGATE_BINARY=$(DIST)/gateway-linux-$$bin DEB_ARCH=$$arch DEB_VERSION=$$v DEB_MAINTAINER='$(DEB_MAINTAINER)' \
	  SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(NFPM) package --config packaging/nfpm.yaml --packager deb --target $(DIST)/fencegate_$${v}_$${arch}.deb || exit 1; \
	done
	cd $(DIST) && sha256sum $(addprefix gateway-linux-,$(DIST_BINS)) fencegate_*.deb > SHA256SUMS

## image: the flashable Raspberry Pi image in dist/image/ (Debian trixie arm64 from Debian's packages, Mosquitto,
##        this tree's .deb), with its checksum, .bmap and manifest; as root, installs the tools it needs from
##        Debian's packages; IMAGE_* settings in piimage/build.sh; see docs/raspberry-pi.md
## image-test: boots dist/image's image in the emulated Raspberry Pi 3B and checks it (3 power cuts, an upgrade)
## image-torture: make image-test with IMAGE_TORTURE_CYCLES (default 20) power cuts instead of 3
.PHONY: image image-test image-torture
image:
	$(MAKE) deb DIST=$(DIST) DIST_BINS=arm64 DEB_ARCHS=arm64
	IMAGE_DEB=$(DIST)/fencegate_$(DEB_VERSION)_arm64.deb piimage/build.sh --install
IMAGE_TORTURE_CYCLES ?= 20
image-test:
	CI=$${CI:-} $(GO) test -tags imagetest -count=1 -v -timeout 40m ./piimage
image-torture:
	CI=$${CI:-} FENCEGATE_IMAGE_CUTS=$(IMAGE_TORTURE_CYCLES) $(GO) test -tags imagetest -count=1 -v -timeout 120m ./piimage

## pi-emu: the emulated Raspberry Pi 3B (QEMU raspi3b, Debian's arm64 kernel, root); see piemu/README.md
.PHONY: pi-emu
pi-emu:
	CI=$${CI:-} $(GO) test ./piemu -run TestPiEmu -v -count=1
