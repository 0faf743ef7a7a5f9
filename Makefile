# charter — build, test and run.  `make help` lists the targets.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

GO            ?= go
BIN           := $(CURDIR)/bin
IMG           ?= charter:dev
VERSION       ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS       := -s -w -X github.com/charter-dev/charter/internal/version.Version=$(VERSION)
CONTROLLER_GEN_VERSION ?= v0.23.0
CONTROLLER_GEN := $(BIN)/controller-gen
KIND_CLUSTER  ?= charter
E2E_PROVIDER  ?=
E2E_LABELS    ?=
GOTEST_FLAGS  ?=

# Tests never read the developer's git configuration; the control plane
# binaries built by `make controlplane` are found through KUBEBUILDER_ASSETS.
export GIT_CONFIG_GLOBAL   := /dev/null
export GIT_CONFIG_NOSYSTEM := true
export KUBEBUILDER_ASSETS  := $(BIN)

.DEFAULT_GOAL := help

##@ General

.PHONY: help
help: ## Show this help.
	@if [ -t 1 ]; then c='\033[36m'; b='\033[1m'; r='\033[0m'; fi; \
	awk -v c="$$c" -v b="$$b" -v r="$$r" 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} \
	  /^[a-zA-Z_0-9-]+:.*?##/ { printf "  %s%-16s%s %s\n", c, $$1, r, $$2 } \
	  /^##@/ { printf "\n%s%s%s\n", b, substr($$0, 5), r }' $(MAKEFILE_LIST)

##@ Development

# Each controller has its own ServiceAccount and role (config/rbac/<name>),
# generated from the +kubebuilder:rbac markers of its packages only:
# <name>=<package paths>. background and cleanup add theirs here once
# their packages carry markers (until then config/rbac/<name>/role.yaml is
# written by hand).
RBAC_ROLES := admission=./webhook/... reports=./reconciler/reports/... gitsync=./reconciler/gitsync/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs into config/crd and each controller's role into config/rbac/<controller> from the markers.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	@for r in $(RBAC_ROLES); do name=$${r%%=*}; paths=$${r#*=}; \
	  echo "$(CONTROLLER_GEN) rbac:roleName=charter-$$name paths=$$paths output:rbac:artifacts:config=config/rbac/$$name"; \
	  $(CONTROLLER_GEN) rbac:roleName=charter-$$name paths=$$paths output:rbac:artifacts:config=config/rbac/$$name || exit 1; \
	done

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code for the api/ types.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: fmt
fmt: ## Run gofmt over the code.
	gofmt -s -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## Run go vet.
	$(GO) vet ./...

.PHONY: lint
lint: vet ## Check formatting and vet the code.
	@out=$$(gofmt -s -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "not gofmt'ed:"; echo "$$out"; exit 1; fi

.PHONY: verify
verify: manifests generate ## Fail when generated files are out of date.
	@git diff --exit-code -- api config || { echo "generated files are stale: run make manifests generate"; exit 1; }

##@ Build

.PHONY: build
build: ## Build bin/charter.
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/charter ./cmd/charter

.PHONY: controlplane
controlplane: $(BIN)/etcd $(BIN)/kube-apiserver ## Build etcd and kube-apiserver from Go modules into bin/ (only when missing).

$(BIN)/etcd:
	@echo "building etcd from go.etcd.io/etcd/server/v3 (a few minutes the first time)"
	cd harness/tools && $(GO) build -trimpath -o $(BIN)/etcd go.etcd.io/etcd/server/v3

$(BIN)/kube-apiserver:
	@echo "building kube-apiserver from k8s.io/kubernetes (about 6 minutes the first time)"
	cd harness/tools && $(GO) build -trimpath -o $(BIN)/kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver

$(CONTROLLER_GEN):
	GOBIN=$(BIN) $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)

.PHONY: docker-build
docker-build: ## Build the container image $(IMG).
	docker build --build-arg VERSION=$(VERSION) -t $(IMG) .

##@ Test

.PHONY: test
test: controlplane ## Run unit, integration and e2e tests (local control plane).
	E2E_PROVIDER=$(or $(E2E_PROVIDER),local) $(GO) test $(GOTEST_FLAGS) ./...

.PHONY: e2e
e2e: controlplane build ## Run the Ginkgo e2e suites (E2E_PROVIDER=kind|local, E2E_LABELS=admission,...).
	E2E_PROVIDER=$(E2E_PROVIDER) E2E_CHARTER=$(BIN)/charter $(GO) run github.com/onsi/ginkgo/v2/ginkgo -v $(if $(E2E_LABELS),--label-filter='$(E2E_LABELS)') ./harness/e2e/...

.PHONY: bench-reports
bench-reports: controlplane ## Scan 10,000 Pods with the Pod Security policies: time, peak memory, API writes (PODS=10000).
	$(GO) run ./hack/bench-reports -pods $(or $(PODS),10000)

.PHONY: bench-gitops
bench-gitops: controlplane build ## Time a push to an enforced policy (receiver → Pod refused) and the sync of 500 policies (time, peak RSS).
	$(GO) run ./hack/benchgitops -charter $(BIN)/charter

.PHONY: bench-admission
bench-admission: controlplane build ## Admission latency: open loop to the webhook vs a null one, then via kube-apiserver dry-run (RATE=1000 DURATION=20s API_RATE=100).
	$(GO) run ./hack/benchadmission -charter $(BIN)/charter $(if $(RATE),-rate $(RATE)) $(if $(DURATION),-duration $(DURATION)) $(if $(API_RATE),-api-rate $(API_RATE))

.PHONY: bench
bench: ## Run the Go benchmarks and print their figures.
	$(GO) test -run '^$$' -bench . -benchmem ./engine/...

CONFORMANCE   ?= $(abspath $(CURDIR)/../shared/conformance)
BENCH_RUNS    ?= 5
PSS_POLICIES   = $(shell ls $(CONFORMANCE)/kyverno-policies/pod-security/baseline/*/*.yaml $(CONFORMANCE)/kyverno-policies/pod-security/restricted/*/*.yaml 2>/dev/null | grep -v kustomization)

.PHONY: bench-cli
bench-cli: build ## Time `charter test` over the validate and cel conformance lists (wall, CPU, peak RSS vs targets; best of BENCH_RUNS).
	$(GO) run ./hack/conformance -charter $(BIN)/charter -dir $(CONFORMANCE) -runs $(BENCH_RUNS) -lists validate,cel

.PHONY: conformance
conformance: build ## Run `charter test` over every conformance list: passed, failed, wall time, peak memory; fails when a claimed list (internal/corpus) has a failure.
	$(GO) run ./hack/conformance -charter $(BIN)/charter -dir $(CONFORMANCE)

.PHONY: bench-apply
bench-apply: build ## Time `charter apply` of the 18 Pod Security policies to 2000 generated Pods.
	@test -n "$(PSS_POLICIES)" || { echo "no pod-security policies under $(CONFORMANCE) (set CONFORMANCE=)"; exit 1; }
	@dir=$$(mktemp -d) && trap 'rm -rf "$$dir"' EXIT && \
	  $(GO) run ./hack/genpods -n 2000 -dir "$$dir" && \
	  echo "$(words $(PSS_POLICIES)) policies, 2000 Pods (half non-compliant) in $$dir" && \
	  $(GO) run ./hack/benchrun -runs $(BENCH_RUNS) -- $(BIN)/charter apply $(PSS_POLICIES) --resource "$$dir"

##@ Run

.PHONY: run
run: controlplane build ## The whole of charter on the local control plane: admission, reports, gitsync of environments/dev from this checkout.
	$(BIN)/charter dev

.PHONY: kind-create
kind-create: ## Create a kind cluster named $(KIND_CLUSTER) (needs Docker).
	$(GO) run ./harness/cmd/cluster create --provider kind --name $(KIND_CLUSTER)

.PHONY: kind-delete
kind-delete: ## Delete the kind cluster $(KIND_CLUSTER).
	$(GO) run ./harness/cmd/cluster delete --provider kind --name $(KIND_CLUSTER)

.PHONY: deploy
deploy: ## Apply the CRDs and charter's manifests to the current kubectl context.
	kubectl apply --server-side -k config/default
