# Placement simulator (cmd/gpushare-sim) and docs/placement.md's results.
# The openb trace is never committed: point TRACES at a copy of alibaba/clusterdata's
# cluster-trace-gpu-v2023/csv (the default is the shared copy next to the checkout).
TRACES       ?= ../shared/traces/openb-2023
SIM_SEEDS    ?= 42-51
SIM_POLICIES ?= fgd-online,fgd,binpack,spread,random
SIM_TRACES   ?= default gpushare100 multigpu50 gpushare40 gpuspec33
SIM_PARALLEL ?= 2
SIM_DOC      := docs/placement.md
SIM_FLAGS     = --nodes $(TRACES)/openb_node_list_gpu_node.csv --seeds $(SIM_SEEDS) --policy $(SIM_POLICIES) --parallel $(SIM_PARALLEL)

.PHONY: sim
sim: cmd-gpushare-sim ## Run the simulator on the default openb trace (TRACES=dir, SIM_SEEDS=42-51).
	$(BIN)/gpushare-sim $(SIM_FLAGS) --pods $(TRACES)/openb_pod_list_default.csv

.PHONY: sim-docs
sim-docs: cmd-gpushare-sim ## Regenerate docs/placement.md's results tables and docs/placement.png from the traces in TRACES.
	@test -f $(TRACES)/openb_node_list_gpu_node.csv || { echo "no openb trace in TRACES=$(TRACES)"; exit 1; }
	@tmp=$$(mktemp); for t in $(SIM_TRACES); do \
	  extra=""; [ $$t = default ] && extra="--plot docs/placement.png --curve $$tmp.curve.csv"; \
	  $(BIN)/gpushare-sim $(SIM_FLAGS) --pods $(TRACES)/openb_pod_list_$$t.csv --markdown $$extra >> $$tmp || exit 1; \
	done; \
	awk -v f=$$tmp '/<!-- results:begin -->/{print; while((getline l < f)>0) print l; skip=1; next} /<!-- results:end -->/{skip=0} !skip' $(SIM_DOC) > $$tmp.doc && \
	mv $$tmp.doc $(SIM_DOC); rm -f $$tmp $$tmp.curve.csv

SIM_TOPO_TRACES   ?= default multigpu50 gpushare40
SIM_TOPO_POLICIES ?= fgd-online,binpack,spread

.PHONY: sim-topology
sim-topology: cmd-gpushare-sim ## Multi-card containers on synthetic card topologies, placement seeing them or not (docs/placement.md, "Card topology").
	@for t in $(SIM_TOPO_TRACES); do for topo in synthetic-blind synthetic; do \
	  $(BIN)/gpushare-sim --nodes $(TRACES)/openb_node_list_gpu_node.csv --pods $(TRACES)/openb_pod_list_$$t.csv \
	    --seeds $(SIM_SEEDS) --policy $(SIM_TOPO_POLICIES) --parallel $(SIM_PARALLEL) --topology $$topo --markdown || exit 1; \
	done; done

SIM_PREEMPT_TRACES   ?= default gpushare40
SIM_PREEMPT_POLICIES ?= fgd-online,binpack

.PHONY: sim-preemption
sim-preemption: cmd-gpushare-sim ## Each policy without and with GPU preemption, priorities from the trace's qos (docs/placement.md, "Preemption").
	@for t in $(SIM_PREEMPT_TRACES); do \
	  $(BIN)/gpushare-sim --nodes $(TRACES)/openb_node_list_gpu_node.csv --pods $(TRACES)/openb_pod_list_$$t.csv \
	    --seeds $(SIM_SEEDS) --policy $(SIM_PREEMPT_POLICIES) --parallel $(SIM_PARALLEL) --preemption --markdown || exit 1; \
	done

SIM_DRA_TRACES   ?= default gpushare40 multigpu50
SIM_DRA_VARIANTS ?= off,index,tightest,emptiest,naive-index,naive-tightest,naive-emptiest,kube-index,kube-tightest,kube-emptiest

.PHONY: sim-dra
sim-dra: cmd-gpushare-sim ## DRA's card choice priced: kube-scheduler's allocator takes the card first-fit, fgd-online or kube-scheduler alone the node (docs/placement.md, "Under DRA").
	@for t in $(SIM_DRA_TRACES); do \
	  $(BIN)/gpushare-sim --nodes $(TRACES)/openb_node_list_gpu_node.csv --pods $(TRACES)/openb_pod_list_$$t.csv \
	    --seeds $(SIM_SEEDS) --policy fgd-online --parallel $(SIM_PARALLEL) --dra $(SIM_DRA_VARIANTS) --markdown || exit 1; \
	done
