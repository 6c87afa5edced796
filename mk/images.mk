# Container images without a container engine (hack/tools/image, go-containerregistry): the
# binaries of build/*.Dockerfile assembled onto an empty base, written as tarballs to
# $(IMAGES_DIR) for `docker load`, `podman load` or `ctr images import`.
IMAGE_REPO ?= gpushare
IMAGE_TAG  ?= $(VERSION)
IMAGES_DIR ?= $(BIN)/images
IMAGE_TOOL_MOD := hack/tools/image
IMAGE_TOOL     := $(TOOLS_BIN)/image

TEST_FAST += test-image-tool

$(IMAGE_TOOL): $(IMAGE_TOOL_MOD)/go.mod $(wildcard $(IMAGE_TOOL_MOD)/*.go)
	cd $(IMAGE_TOOL_MOD) && $(GO) build -o $@ .

.PHONY: images
images: $(IMAGE_TOOL) ## Build the extender and share-plugin images (and share-plugin-fakenvml) as tarballs in bin/images/: IMAGE_REPO= IMAGE_TAG=.
	@mkdir -p $(IMAGES_DIR)/bin
	CGO_ENABLED=0 $(GO) build -ldflags "-s -w $(LDFLAGS)" -o $(IMAGES_DIR)/bin/extender ./cmd/extender
	CGO_ENABLED=1 $(GO) build -ldflags "-s -w $(LDFLAGS)" -o $(IMAGES_DIR)/bin/share-plugin ./cmd/share-plugin
	CGO_ENABLED=1 $(GO) build -tags fakenvml -ldflags "-s -w $(LDFLAGS)" -o $(IMAGES_DIR)/bin/share-plugin-fakenvml/share-plugin ./cmd/share-plugin
	$(IMAGE_TOOL) --binary $(IMAGES_DIR)/bin/extender --ref $(IMAGE_REPO)/extender:$(IMAGE_TAG) \
	  --version $(VERSION) --commit "$(COMMIT)" --out $(IMAGES_DIR)/extender.tar
	$(IMAGE_TOOL) --binary $(IMAGES_DIR)/bin/share-plugin --ref $(IMAGE_REPO)/share-plugin:$(IMAGE_TAG) --shared-libs \
	  --version $(VERSION) --commit "$(COMMIT)" --out $(IMAGES_DIR)/share-plugin.tar
	$(IMAGE_TOOL) --binary $(IMAGES_DIR)/bin/share-plugin-fakenvml/share-plugin --ref $(IMAGE_REPO)/share-plugin:$(IMAGE_TAG)-fakenvml --shared-libs \
	  --version $(VERSION) --commit "$(COMMIT)" --out $(IMAGES_DIR)/share-plugin-fakenvml.tar

.PHONY: test-image-tool
test-image-tool: ## Tests of the image builder (hack/tools/image).
	cd $(IMAGE_TOOL_MOD) && $(GO) test -race ./...

.PHONY: verify-image-tool
verify-image-tool: ## go vet and go mod tidy -diff in the image builder's module.
	cd $(IMAGE_TOOL_MOD) && $(GO) vet ./...
	cd $(IMAGE_TOOL_MOD) && $(GO) mod tidy -diff
verify: verify-image-tool
