# dflash.c - build, weights, run, tests, generated docs.  `make help` lists the targets.
#
# How the build works (read this before adding a rule):
#   - A build MODE is a compiler and a set of flags: float and double (-O2,
#     REAL=float|double), <real>-debug (-O0 -g3, no target_clones), <real>-san
#     (ASan+UBSan), <real>-fuzz (libFuzzer), host (the generators). Every
#     object is made by ONE compile rule (`compile` below): build/<mode>/x.o
#     from x.c with that mode's flags. build/<mode>/flags holds the mode's
#     compile line and changes only when it does (a different CC, CFLAGS,
#     REAL), so every object of the mode is then recompiled; header
#     dependencies come from the compiler (-MMD).
#   - A PROGRAM is linked by ONE link rule (`program` below) from the objects
#     of one mode. A program whose mode follows REAL also depends on
#     build/real, which changes with REAL: `make REAL=double` relinks every
#     such program (./dflash, ./dflash-debug, the tests, ...) from
#     build/double/, and switching back relinks from build/float/ without
#     recompiling.
#   - To add a source file to ./dflash: add its name to DFLASH_SRC.
#     To add a program: one line,
#       $(call program,BINARY,MODE,SOURCES WITHOUT .c,LIBS)
#     e.g. $(call program,tools/foo,$(REAL),tools/foo formats/json formats/files,-lm).
#     A new tests/test_*.c is picked up by itself (linked with TEST_LIB, or
#     TEST_LIB_<name> if set) into tests/bin/, build/san/tests/bin/ and make test
#     (make test-long instead when it runs the pitfalls' programs: LONG_ONLY_TESTS).
#     A generated page: a gen_* function in tools/docs.sh, then `make docs`
#     writes it and `make docs-check` checks it.
#   - Recipes longer than a few lines are scripts in tools/.
CC      ?= cc
REAL    ?= float
ifeq ($(filter $(REAL),float double),)
  $(error REAL must be float or double, not '$(REAL)')
endif
CFLAGS  ?= -O2
SAN_CC  ?= clang
FUZZ_CC ?= clang
WARN    = -std=c11 -Wall -Wextra -Werror -pedantic
# -ffp-contract=off: no FMA contraction, so -O0 and -O2 give identical bits.
FPFLAGS = -ffp-contract=off -fno-fast-math
BASE    = $(WARN) $(FPFLAGS) -D_POSIX_C_SOURCE=200809L -I.
LDLIBS  = -lm -lpthread

# ---- the sources ------------------------------------------------------------
# dflash.c is the algorithm; kernel.c its fast matmul (the same bits; it
# replaces dflash.c's weak naive one where it is linked: ./dflash, its
# variants and the tests, not the -debug builds; kernel.c's comment says why);
# the rest is what a program around it needs.
# build/explorer_page.c is generated: the explorer's page (web/), embedded by explorer/embed.
DFLASH_SRC = dflash kernel formats/tracenames formats/json formats/load trace formats/files formats/manifest cli/flags cli/main cli/bench cli/diff cli/replay \
             explorer/explore explorer/figures build/explorer_page train/train train/train_data train/draftdir train/train_cli \
             train/train_target train/checkpoint train/corpus gguf/gguf eval/lookup eval/eval tokenizer/tokenizer tokenizer/tokenize
# the -debug builds: the same without kernel.c, so `break matmul` in gdb stops in dflash.c's loop
DEBUG_SRC  = $(filter-out kernel,$(DFLASH_SRC))
# the tests #include dflash.c and formats/load.c (to reach their static functions)
# and link the rest; test_hook links dflash.c WITHOUT trace.c (it stands alone).
TEST_LIB           = kernel formats/tracenames formats/json tokenizer/tokenizer trace formats/files formats/manifest cli/diff cli/flags
# test_hook is a port's in-process harness: dflash.c, the table that shapes
# what its hook receives (formats/tracenames.c) and the loader, WITHOUT trace.c
TEST_LIB_test_hook = dflash kernel formats/tracenames formats/json formats/load tokenizer/tokenizer formats/files
# test_flags includes cli/main.c (its main renamed) and checks every subcommand's flag table
TEST_LIB_test_flags = $(filter-out cli/main,$(DFLASH_SRC))
# test_layouts #includes cli/bench.c, whose learned-pair table runs eval/lookup.c's drafters
TEST_LIB_test_layouts = $(TEST_LIB) eval/lookup
# test_json #includes formats/json.c and formats/manifest.c (their key comparisons counted)
TEST_LIB_test_json = dflash formats/files
# test_tokenizer #includes tokenizer/tokenizer.c
TEST_LIB_test_tokenizer = dflash formats/json formats/files
# the suites: tests/test_*.c (the reference, the tracer, the program) and each
# wing's WING/tests/test_*.c; every binary goes to tests/bin/NAME
TEST_SRC   = $(wildcard tests/test_*.c */tests/test_*.c)
TEST_NAMES = $(basename $(notdir $(TEST_SRC)))
test_src   = $(patsubst %.c,%,$(filter %/$(1).c,$(TEST_SRC)))
FUZZ_TARGETS = safetensors config tokenizer npy tokjson encode explore figures batches gguf
FUZZ_LIB          = formats/tracenames formats/json tokenizer/tokenizer trace formats/files formats/manifest cli/diff cli/flags
# fuzz_encode: the encoder alone
FUZZ_LIB_fuzz_encode = formats/json tokenizer/tokenizer formats/files
FUZZ_LIB_fuzz_npy = dflash formats/json formats/load tokenizer/tokenizer formats/files formats/manifest
# fuzz_gguf #includes gguf/gguf.c (its tokenizer.json and safetensors readers, its writer)
FUZZ_LIB_fuzz_gguf = dflash formats/json formats/load tokenizer/tokenizer formats/files formats/manifest cli/flags
# fuzz_explore #includes explorer/explore.c and runs explore_main whole
FUZZ_LIB_fuzz_explore = dflash formats/tracenames formats/json formats/load tokenizer/tokenizer trace formats/files formats/manifest build/explorer_page cli/flags
# fuzz_batches #includes train/train_data.c and drives the --batches case reader
FUZZ_LIB_fuzz_batches = dflash formats/json formats/load tokenizer/tokenizer formats/files train/train
# fuzz_figures #includes explorer/figures.c and runs figures_main whole
FUZZ_LIB_fuzz_figures = dflash formats/tracenames formats/json formats/load tokenizer/tokenizer trace formats/files formats/manifest cli/flags
WEIGHTS = toy_weights/random/.stamp toy_weights/walkthrough/.stamp toy_weights/qwen3-layout/.stamp \
          toy_weights/sliding/.stamp toy_weights/llama/.stamp toy_weights/lm-tiny/.stamp toy_weights/hybrid/.stamp

# ---- build modes: name -> compiler and flags ----------------------------------
realdef = $(if $(filter double,$(1)),-DDFLASH_DOUBLE)
SANFLAGS  = -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
# the -debug modes: no target_clones anywhere (cli/bench.c's probe, train/train.c's
# backward), so gdb's `break` on any function stops in one place, not in a resolver
NOCLONES  = -DDFLASH_NO_CLONES
FUZZFLAGS = -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
define modes_of   # the modes of one precision, $(1) = float or double
CC_$(1)             = $$(CC)
FLAGS_$(1)          = $$(BASE) $(call realdef,$(1)) $$(CFLAGS)
CC_$(1)-debug       = $$(CC)
FLAGS_$(1)-debug    = $$(BASE) $(call realdef,$(1)) -O0 -g3 $$(NOCLONES)
CC_$(1)-san         = $$(SAN_CC)
FLAGS_$(1)-san      = $$(BASE) $(call realdef,$(1)) $$(SANFLAGS) -O1
CC_$(1)-san-debug   = $$(SAN_CC)
FLAGS_$(1)-san-debug = $$(BASE) $(call realdef,$(1)) $$(SANFLAGS) -O0 $$(NOCLONES)
CC_$(1)-fuzz        = $$(FUZZ_CC)
FLAGS_$(1)-fuzz     = $$(BASE) $(call realdef,$(1)) $$(FUZZFLAGS)
endef
$(eval $(call modes_of,float))
$(eval $(call modes_of,double))
# the generators (weights, walkthrough pages): fixed flags, whatever REAL is
CC_host    = $(CC)
FLAGS_host = $(BASE) -O2
R = $(REAL)
MODES = $(sort $(R) $(R)-debug $(R)-san $(R)-san-debug $(R)-fuzz \
               float double float-san double-san host)

# build/<mode>/flags and build/real are written when make reads this file
# (so `make -n` shows what a switch rebuilds), and only when they change.
$(shell mkdir -p $(addprefix build/,$(MODES)); \
  echo 'REAL=$(REAL)' | cmp -s - build/real || echo 'REAL=$(REAL)' > build/real; \
  $(foreach m,$(MODES),echo '$(CC_$(m)) $(FLAGS_$(m))' | cmp -s - build/$(m)/flags || \
                        echo '$(CC_$(m)) $(FLAGS_$(m))' > build/$(m)/flags;))

all: dflash build/dflash-replay weights walkthrough/explorer.html examples/hook_harness ## build ./dflash, generate the toy weights and the explorer page (the default)

help: ## list the targets
	@sed -n 's/^#* *\([a-z][a-z-]*\):.*## \(.*\)/\1|\2/p' $(MAKEFILE_LIST) | \
	  awk -F'|' '{ printf "  make %-20s %s\n", $$1, $$2 }'
	@echo '  make REAL=double ...      any target in double precision (./dflash writes <f8 traces)'

# ---- the one compile rule and the one link rule -----------------------------
define compile
build/$(1)/%.o: %.c build/$(1)/flags
	@mkdir -p $$(@D)
	$$(CC_$(1)) $$(FLAGS_$(1)) -MMD -MP -c -o $$@ $$<
endef
$(foreach m,$(MODES),$(eval $(call compile,$(m))))
-include $(shell find build -name '*.d' 2>/dev/null)

# $(call program,BINARY,MODE,SOURCES,LIBS): BINARY linked from build/MODE/*.o
program = $(eval $(call program_rule,$(1),$(2),$(3),$(4)))
define program_rule
$(1): $(patsubst %,build/$(2)/%.o,$(3)) build/$(2)/flags $(if $(filter $(REAL)%,$(2)),build/real)
	$(if $(filter-out ./,$(dir $(1))),@mkdir -p $(dir $(1)))
	$$(CC_$(2)) $$(FLAGS_$(2)) -o $$@ $$(filter %.o,$$^) $(4)
endef

# ---- the programs -------------------------------------------------------------
$(call program,dflash,$(R),$(DFLASH_SRC),$(LDLIBS))
# the learned target's unigram and bigram baselines (docs/learned.md)
$(call program,eval/ngram,$(R),eval/ngram train/corpus tokenizer/tokenizer formats/json formats/files dflash,$(LDLIBS))
# -O0 -g3 for gdb (walkthrough/gdb.md)
# dflash-debug: ## ./dflash-debug alone (-O0 -g3)
$(call program,dflash-debug,$(R)-debug,$(DEBUG_SRC),$(LDLIBS))
# ---- porting pitfalls: each one a patch of the clean source
# walkthrough/pitfalls/NAME.diff is one classic mistake of a port, written as
# the wrong lines; walkthrough/pitfalls/series lists them in order.
# build/pitfalls/dflash-NAME is ./dflash with that one patch applied (GNU
# patch, no fuzz) to a copy of the one file it patches, build/pitfalls/NAME/,
# compiled with the mode's flags and linked with the mode's objects of the
# other sources (tools/pitfall.sh). A patch that no longer applies fails the
# build, and so make test-long and make pitfalls-check.
PITFALL_DIR = walkthrough/pitfalls
PITFALLS    = $(shell sed -e 's/[#].*//' $(PITFALL_DIR)/series)
PITFALL_PROGRAMS = $(patsubst %,build/pitfalls/dflash-%,$(PITFALLS))
# $(call pitfalls_in,DIR,MODE): DIR/dflash-NAME from the objects of MODE
define pitfalls_in
$(1)/dflash-%: $(PITFALL_DIR)/%.diff $(patsubst %,build/$(2)/%.o,$(DFLASH_SRC)) build/$(2)/flags \
               $(if $(filter $(REAL)%,$(2)),build/real) tools/pitfall.sh
	sh tools/pitfall.sh build $$< $$@ '$$(CC_$(2)) $$(FLAGS_$(2))' '$$(LDLIBS)' $$(filter %.o,$$^)
endef
$(eval $(call pitfalls_in,build/pitfalls,$(R)))
# $(call replay_in,DIR,MODE): DIR/dflash-replay from the objects of MODE
define replay_in
$(1)/dflash-replay: cli/replay.diff $(patsubst %,build/$(2)/%.o,$(DFLASH_SRC)) build/$(2)/flags \
               $(if $(filter $(REAL)%,$(2)),build/real) tools/pitfall.sh
	sh tools/pitfall.sh build $$< $$@ '$$(CC_$(2)) $$(FLAGS_$(2))' '$$(LDLIBS)' $$(filter %.o,$$^)
endef
$(eval $(call pitfalls_in,build/san/build/pitfalls,$(R)-san))
# the same for tests/signatures/NAME.diff: mistakes whose signature `dflash
# diff` names exactly (tests/test_diff_hints.c), built as build/signatures/dflash-NAME
SIGNATURES = $(patsubst tests/signatures/%.diff,%,$(wildcard tests/signatures/*.diff))
SIGNATURE_PROGRAMS = $(patsubst %,build/signatures/dflash-%,$(SIGNATURES))
define signatures_in
$(1)/dflash-%: tests/signatures/%.diff $(patsubst %,build/$(2)/%.o,$(DFLASH_SRC)) build/$(2)/flags \
               $(if $(filter $(REAL)%,$(2)),build/real) tools/pitfall.sh
	sh tools/pitfall.sh build $$< $$@ '$$(CC_$(2)) $$(FLAGS_$(2))' '$$(LDLIBS)' $$(filter %.o,$$^)
endef
$(eval $(call signatures_in,build/signatures,$(R)))
$(eval $(call signatures_in,build/san/build/signatures,$(R)-san))
# The training pitfalls, the same way: walkthrough/train-pitfalls/NAME.diff is
# a patch of train/train.c, build/pitfalls/dflash-train-NAME ./dflash with it (its
# copy in build/pitfalls/train-NAME/).
TRAIN_PITFALL_DIR = walkthrough/train-pitfalls
TRAIN_PITFALLS    = $(shell sed -e 's/[#].*//' $(TRAIN_PITFALL_DIR)/series)
TRAIN_PITFALL_PROGRAMS = $(patsubst %,build/pitfalls/dflash-train-%,$(TRAIN_PITFALLS))
define train_pitfalls_in
$(1)/dflash-train-%: $(TRAIN_PITFALL_DIR)/%.diff $(patsubst %,build/$(2)/%.o,$(DFLASH_SRC)) build/$(2)/flags \
               $(if $(filter $(REAL)%,$(2)),build/real) tools/pitfall.sh
	sh tools/pitfall.sh build $$< $$@ '$$(CC_$(2)) $$(FLAGS_$(2))' '$$(LDLIBS)' $$(filter %.o,$$^)
endef
$(eval $(call train_pitfalls_in,build/pitfalls,$(R)))
$(eval $(call train_pitfalls_in,build/san/build/pitfalls,$(R)-san))
# The learned pair's experiment variants (walkthrough/training/variants/NAME.diff,
# each a patch of one file, built as a pitfall is): build/variants/dflash-NAME.
# They are no pitfalls: the experiments of learned/learned.sh train and run them.
VARIANT_DIR = walkthrough/training/variants
VARIANTS = $(patsubst $(VARIANT_DIR)/%.diff,%,$(wildcard $(VARIANT_DIR)/*.diff))
VARIANT_PROGRAMS = $(patsubst %,build/variants/dflash-%,$(VARIANTS))
build/variants/dflash-%: $(VARIANT_DIR)/%.diff $(patsubst %,build/$(R)/%.o,$(DFLASH_SRC)) build/$(R)/flags tools/pitfall.sh
	sh tools/pitfall.sh build $< $@ '$(CC_$(R)) $(FLAGS_$(R))' '$(LDLIBS)' $(filter %.o,$^)
variant-programs: $(VARIANT_PROGRAMS) ## build/variants/dflash-NAME: the learned pair's experiment variants
# pitfall-programs: ## build/pitfalls/dflash-NAME and dflash-train-NAME: ./dflash with one porting or training mistake
pitfall-programs: $(PITFALL_PROGRAMS) $(TRAIN_PITFALL_PROGRAMS)
	@sh tools/pitfall.sh check-series $(PITFALL_DIR)
	@sh tools/pitfall.sh check-series $(TRAIN_PITFALL_DIR)
# ---- replay (TRACE.md "Replay"): build/dflash-replay is ./dflash with cli/replay.diff,
# the lines that follow another run's tokens, kept out of dflash.c and built as
# a pitfall is; `./dflash --replay DIR` runs it (cli/replay.c, replay_exec).
# build/dflash-replay: ## ./dflash with cli/replay.diff (what ./dflash --replay runs)
$(eval $(call replay_in,build,$(R)))
$(eval $(call replay_in,build/san/build,$(R)-san))
# each precision under its own name, for the float-vs-double tests (./dflash is one of them)
# dflash-double: ## ./dflash-double, the double-precision build beside ./dflash
$(call program,dflash-double,double,$(DFLASH_SRC),$(LDLIBS))
# dflash-float: ## ./dflash-float, the float build beside ./dflash
$(call program,dflash-float,float,$(DFLASH_SRC),$(LDLIBS))
# ---- examples/: a port's in-process C harness (TRACE.md, "The hook: a C API")
# examples/hook_harness: the float build's objects, whatever REAL is (it reads floats);
# build/examples/hook_harness-on-double: the same harness object linked with the
# double build's objects, which it must refuse; build/examples/hook_harness-doc:
# built with the link line TRACE.md gives, to keep that line true
# (tools/examples-check.sh runs all three; make test runs it).
HOOK_HARNESS_LIB = dflash formats/tracenames formats/json formats/load tokenizer/tokenizer formats/files
EXAMPLE_PROGRAMS = examples/hook_harness build/examples/hook_harness-on-double build/examples/hook_harness-doc
$(call program,examples/hook_harness,float,examples/hook_harness $(HOOK_HARNESS_LIB),$(LDLIBS))
build/examples/hook_harness-on-double: build/float/examples/hook_harness.o $(patsubst %,build/double/%.o,$(HOOK_HARNESS_LIB))
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(LDLIBS)
build/examples/hook_harness-doc: examples/hook_harness.c $(patsubst %,%.c,$(HOOK_HARNESS_LIB)) dflash.h formats/load.h formats/tracenames.h formats/files.h formats/json.h
	@mkdir -p $(@D)
	$(CC) -std=c11 -D_POSIX_C_SOURCE=200809L -ffp-contract=off -I. -o $@ \
	  examples/hook_harness.c dflash.c formats/tracenames.c formats/load.c tokenizer/tokenizer.c formats/json.c formats/files.c -lm
examples-check: $(EXAMPLE_PROGRAMS) weights ## build and run examples/hook_harness (a port's in-process C harness)
	@sh tools/examples-check.sh
# tools/mktrace reads the name table (formats/tracenames.c)
$(call program,tools/mktrace,$(R),tools/mktrace dflash formats/tracenames formats/json formats/files,$(LDLIBS))
# The explorer's page is explorer/explorer.html, .css and .js; explorer/embed inlines
# the CSS and JavaScript into the HTML and writes its bytes as C arrays that
# explorer/explore.c writes around the trace's data.
$(call program,explorer/embed,host,explorer/embed formats/files dflash,$(LDLIBS))
WEB = explorer/explorer.html explorer/explorer.css explorer/explorer.js
build/explorer_page.c: explorer/embed $(WEB)
	@mkdir -p build
	./explorer/embed explorer/explorer.html $@ explorer_page
# mkwalk reads the trace with formats/manifest.c and formats/files.c (dflash.c for dflash_set_error), and the
# training chapter's target (its lm_head) with formats/load.c
$(call program,walkthrough/tools/mkwalk,host,walkthrough/tools/mkwalk formats/manifest formats/json formats/files formats/load tokenizer/tokenizer dflash,$(LDLIBS))
# mklearned (the chapter "One round on English text", walkthrough/learned/) reads the learned
# pair's trace with formats/files.c and its tokenizer.json with tokenizer/tokenizer.c
$(call program,walkthrough/tools/mklearned,host,walkthrough/tools/mklearned formats/json formats/files tokenizer/tokenizer dflash,$(LDLIBS))
# mkhybrid (the chapter "A recurrent state in the loop", walkthrough/hybrid/) reads two traces of the hybrid set
$(call program,walkthrough/tools/mkhybrid,host,walkthrough/tools/mkhybrid formats/json formats/files dflash,$(LDLIBS))
# the weight generator uses no libm: the files are bit-identical everywhere
$(call program,toy_weights/gen,host,toy_weights/gen,)
$(foreach t,$(TEST_NAMES),$(call program,tests/bin/$(t),$(R),$(call test_src,$(t)) $(or $(TEST_LIB_$(t)),$(TEST_LIB)),$(LDLIBS) -lcmocka))
# sanitized builds (make sanitize): build/san/ holds the programs the tests run and the tests
$(call program,build/san/dflash,$(R)-san,$(DFLASH_SRC),$(LDLIBS))
$(call program,build/san/dflash-debug,$(R)-san-debug,$(DEBUG_SRC),$(LDLIBS))
$(call program,build/san/dflash-double,double-san,$(DFLASH_SRC),$(LDLIBS))
$(call program,build/san/dflash-float,float-san,$(DFLASH_SRC),$(LDLIBS))
$(foreach t,$(TEST_NAMES),$(call program,build/san/tests/bin/$(t),$(R)-san,$(call test_src,$(t)) $(or $(TEST_LIB_$(t)),$(TEST_LIB)),$(LDLIBS) -lcmocka))
$(foreach f,$(FUZZ_TARGETS),$(call program,build/fuzz/fuzz_$(f),$(R)-fuzz,tests/fuzz/fuzz_$(f) $(or $(FUZZ_LIB_fuzz_$(f)),$(FUZZ_LIB)),$(LDLIBS)))

.PHONY: all help run run-hybrid bench debug weights learned-draft run-learned eval-learned learned-experiments learned-train-pitfalls variant-programs test test-pre test-fixtures test-long standalone-check sanitize memcheck fuzz clean js-check llama-check tokenizer-check unicode-tables llama-spec-check llama-bench \
        docs docs-check trace-md trace-md-check walkthrough walkthrough-check learned-walk learned-walk-check hybrid-walk hybrid-walk-check explorer explorer-check \
        gdb-guide gdb-check gdb-typed-check exercises-check pitfalls pitfalls-check pitfall-programs examples-check train-pitfall-runs \
        learned-data learned-target learned-target-eval learned-check learned-sampling performance performance-check

# ---- weights -----------------------------------------------------------------
weights: $(WEIGHTS) ## generate the toy weight sets under toy_weights/
toy_weights/random/.stamp: toy_weights/gen
	./toy_weights/gen random toy_weights/random
	touch $@
toy_weights/walkthrough/.stamp: toy_weights/gen
	./toy_weights/gen walkthrough toy_weights/walkthrough
	touch $@
# a published checkpoint's layout (BF16, sharded target, tied embeddings), ~2 MB
toy_weights/qwen3-layout/.stamp: toy_weights/gen
	rm -rf toy_weights/qwen3-layout
	./toy_weights/gen qwen3-layout toy_weights/qwen3-layout
	touch $@
# the sliding-window draft set and the LlamaForCausalLM set (gen.c, sections 11-12)
# and the lm-tiny target (section 13: the committed target-training oracle trace's)
# and the hybrid Qwen3.5 set (section 14: Gated DeltaNet + gated attention, ~115 MB)
toy_weights/sliding/.stamp toy_weights/llama/.stamp toy_weights/lm-tiny/.stamp toy_weights/hybrid/.stamp: toy_weights/%/.stamp: toy_weights/gen
	rm -rf toy_weights/$*
	./toy_weights/gen $* toy_weights/$*
	touch $@

# ---- training (docs/training.md; not part of make test) ----------------------
# make train: a draft for the random target trained on what the target writes
# (train/train.sh, the recipe at its top): toy_weights/trained/ (generated,
# never committed). make train-experiments: the experiments, trained on the
# same data: walkthrough/training/logs/ (committed; the page and figures are
# made from these logs by make docs and checked by make docs-check).
train: dflash weights ## train a draft for the random target (minutes): toy_weights/trained/
	sh train/train.sh trained
train-experiments: dflash weights ## the training experiments (after make train; ~an hour on a busy machine): walkthrough/training/logs/
	sh train/train.sh experiments
training: ## regenerate walkthrough/training/ (page, figures) from the committed run logs
	sh tools/docs.sh write training
training-check: ## fail if walkthrough/training/ differs from a regeneration from the run logs
	@sh tools/docs.sh check training

# ---- the learned target (docs/learned.md; not part of make test) -------------
# make learned-data: the corpus, Debian's fortunes package split by document
# (learned/learned_data.sh, the rule at its top): build/learned/train.txt and
# heldout.txt, the same bytes on every machine with the same package version.
FORTUNES_DIR ?= /usr/share/games/fortunes
learned-data: build/learned/train.txt ## the learned target's corpus (Debian fortunes): build/learned/{train,heldout}.txt
build/learned/train.txt build/learned/heldout.txt: learned/learned_data.sh
	sh learned/learned_data.sh $(FORTUNES_DIR) build/learned
# make learned-target: the tokenizer, then the target, trained from scratch
# (learned/learned_target.sh, the recipe at its top; hours with 2 threads):
# toy_weights/learned/target/ in BF16 and toy_weights/learned/SHA256SUMS,
# the same bytes as the committed ones. make learned-check: the committed
# files against their sums (make test-long runs it).
learned-target: dflash build/learned/train.txt ## retrain the committed learned target bit for bit (hours): toy_weights/learned/
	sh learned/learned_target.sh train
learned-target-eval: dflash eval/ngram build/learned/train.txt ## the learned target's held-out figures beside unigram/bigram, and samples
	sh learned/learned_target.sh eval
learned-check: ## the committed toy_weights/learned/ against its SHA256SUMS
	@sh learned/learned_target.sh check

# ---- the learned pair (learned/learned.sh, the recipe at its top) ------
learned-draft: dflash ## train the learned target's DFlash draft (about 1.5 h, 2 threads): toy_weights/learned/draft/ + SHA256SUMS
	sh learned/learned.sh draft
run-learned: dflash ## the learned pair on the first held-out prompt, with --rounds
	sh learned/learned.sh run
eval-learned: dflash ## dflash eval of the learned pair on 64 held-out prompts: build/learned/eval.tsv (UPDATE=1: the committed toy_weights/learned/eval.tsv)
	sh learned/learned.sh eval
learned-experiments: dflash variant-programs build/pitfalls/dflash-draft-causal ## the learned pair's experiments (~70 min here): walkthrough/training/learned-logs/
	sh learned/learned.sh experiments
# make learned-train-pitfalls: each training pitfall trained from scratch at the
# committed draft's recipe (20-45 min each at THREADS=1 by machine, blocks-see-each-other
# about twice that; PITFALLS= a subset),
# decoded on 64 held-out prompts: walkthrough/train-pitfalls/learned-runs/
PITFALLS ?= $(TRAIN_PITFALLS)
learned-train-pitfalls: dflash $(TRAIN_PITFALL_PROGRAMS) ## training pitfalls on the learned pair, from scratch (20-45 min each): walkthrough/train-pitfalls/learned-runs/
	for p in clean $(PITFALLS); do sh learned/learned.sh pitfall-full $$p || exit 1; done
# make learned-sampling: learned/tests/test_learned.c's T > 0 check (~7 CPU minutes:
# not in make test-long, which CI runs within its 30 minutes) writing its table, one line per prompt, T, method, block and
# tokens (the format: the comment above test_sampling_fits_the_target_distribution)
learned-sampling: tests/bin/test_learned ## T > 0 on the learned pair against the exact target distribution (~7 CPU min): walkthrough/training/learned-logs/sampling.txt
	@mkdir -p walkthrough/training/learned-logs
	DFLASH_TEST_SAMPLING=1 DFLASH_SAMPLING_LOG=walkthrough/training/learned-logs/sampling.txt tests/bin/test_learned

# make run: the build quietly (its output in build/run.log, shown when it
# fails), then the walkthrough's run; it also leaves walkthrough/explorer.html
# in place, where the walkthrough and the exercises send the student.
run: ## build ./dflash, the toy weights (~496 MB, once) and walkthrough/explorer.html quietly, then the walkthrough run ("The cat sat", block 4)
	@echo "make run: ./dflash, the toy weights (toy_weights/, ~496 MB, once) and walkthrough/explorer.html (build log: build/run.log)"
	@mkdir -p build && $(MAKE) --no-print-directory dflash weights walkthrough/explorer.html > build/run.log 2>&1 || \
	  { tail -n 20 build/run.log; echo "make run: the build failed (whole log: build/run.log)"; exit 1; }
	./dflash

# the read roofline, the 1..16-token target forwards, DFlash vs target-only
# decoding and the default run, all in one run (docs/performance.md quotes one
# such run: docs/performance/bench.txt; `make performance` regenerates the page)
bench: dflash weights ## the kernel vs the read roofline, T-token forwards, DFlash vs target-only
	./dflash bench

# the hybrid (Qwen3.5) set's round log: each round also says where every
# Gated DeltaNet layer's state and conv window are rolled back to
run-hybrid: dflash toy_weights/hybrid/.stamp ## the hybrid Qwen3.5 set on "The cat sat" with --rounds: where each linear layer is rolled back to, per round
	./dflash --weights toy_weights/hybrid --prompt "The cat sat" --rounds

debug: dflash-debug weights ## the -O0 -g3 build (./dflash-debug) for gdb

# ---- tests (cmocka) --------------------------------------------------------
# test_train again in double: the finite-difference gradient checks run there
$(call program,tests/bin/test_train_double,double,train/tests/test_train $(TEST_LIB),$(LDLIBS) -lcmocka)
# test_kernel again at -O0 (the -debug mode's flags, kernel.c linked): kernel.c's matmul against dflash.c's there too
$(call program,tests/bin/test_kernel_O0,$(R)-debug,tests/test_kernel $(TEST_LIB),$(LDLIBS) -lcmocka)
# The suites in the order they start (and are printed): the longest first,
# so that the last to start on two cores are short ones and the longest is
# not left running alone at the end (CPU seconds of each, measured alone on
# 2026-12-02 under load: test_train_pitfalls ~12, test_pitfalls ~10,
# test_learned ~6.5, test_trace_run ~6, then 3-5 each for the next nine,
# all others below 3); a suite not listed starts after these, in name order.
TEST_FIRST = test_train_pitfalls test_pitfalls test_learned test_trace_run test_layouts test_figures test_train_cli \
             test_safety test_core test_diff_hints test_train_double test_replay test_train_target
TEST_ALL   = $(TEST_NAMES) test_train_double test_kernel_O0
ALL_TESTS  = $(addprefix tests/bin/,$(filter $(TEST_ALL),$(TEST_FIRST)) $(filter-out $(TEST_FIRST),$(TEST_ALL)))
$(call program,build/san/tests/bin/test_train_double,double-san,train/tests/test_train $(TEST_LIB),$(LDLIBS) -lcmocka)

# make test: for a student, from a fresh clone: it builds only what its
# suites and checks run (TEST_PROGRAMS, quietly: the compiler's lines go to
# build/test-build.log, its tail shown if the build fails, as make run does),
# then runs them (tools/run-tests.sh): first tools/test-fixtures.sh, the
# traces several suites read (the default run and a random-set run, float
# and double: each made once, into build/fixtures/), then the suites and
# the checks that are not suites (TEST_CHECKS) a few at a time (the CPUs
# plus one; TEST_JOBS=N to choose), each into its own log
# (build/test-logs/), one line each: its counts, and why each skipped test
# was skipped; a failure's whole log. The last line is
# "N passed, M failed, K skipped" (cmocka's test cases and the checks, one
# each); make test exits non-zero iff something failed. The long sweeps
# (lossless over prompts x blocks 1..8, the temperature chi-square, ...) run
# on a representative subset.
# make test-long: what make test leaves out, with the same summary: the
# suites that run the pitfalls' and the signatures' programs
# (LONG_ONLY_TESTS) with every pitfall, training pitfall, variant and
# signature program built (TEST_LONG_PROGRAMS: build/pitfalls/*,
# build/variants/*, build/signatures/*, 36 patched copies of a source file,
# each compiled and linked, of which make test builds one; a patch that no
# longer applies fails that build), the
# long sweeps in full (DFLASH_TEST_LONG=1: the suites that read it,
# LONG_TESTS: tu_long/tu_quick in testutil.h; the others run the same
# under it) and learned-check. So make test then make test-long (CI) runs
# every check once. (On a failure make adds its own line, "make: ***
# [Makefile:...: test] Error 1", on stderr after the summary line.)
# The suites make test leaves to make test-long (grep the suites for
# build/pitfalls/, build/signatures/, build/variants/): test_parity runs one
# pitfall program, built alone (below), and stays. test_learned (the learned
# pair: 100 MB of weights decoded, a fifth of make test's CPU seconds) and
# test_figures (the figures extra: every heatmap of several runs drawn) are
# extras' suites that kept make test over its 30 s once built: make test-long
# runs them.
LONG_ONLY_TESTS = tests/bin/test_pitfalls tests/bin/test_train_pitfalls tests/bin/test_diff_hints tests/bin/test_learned tests/bin/test_figures
TESTS       = $(filter-out $(LONG_ONLY_TESTS),$(ALL_TESTS))
TEST_CHECKS = standalone-check trace-md-check examples-check
# what the suites of make test and TEST_CHECKS run: test_replay
# build/dflash-replay, test_trace_run ./dflash-debug, test_figures mkwalk,
# test_parity build/pitfalls/dflash-draft-logits-rows, the fixtures
# ./dflash-float and ./dflash-double, trace-md-check tools/mktrace,
# examples-check the examples
TEST_PROGRAMS = dflash build/dflash-replay dflash-debug dflash-float dflash-double weights walkthrough/tools/mkwalk \
                build/pitfalls/dflash-draft-logits-rows tools/mktrace $(EXAMPLE_PROGRAMS)
TEST_LONG_PROGRAMS = $(TEST_PROGRAMS) pitfall-programs variant-programs $(SIGNATURE_PROGRAMS)
LONG_TESTS = $(addprefix tests/bin/,$(basename $(notdir $(shell grep -l -e 'tu_long()' -e 'tu_quick()' $(TEST_SRC)))))
# $(call quiet_build,NAME,TARGETS): make TARGETS (two at a time unless make
# has a -j), its output into build/NAME-build.log; when it fails, the log's
# tail and a summary line counting the build as one failure
define quiet_build
@mkdir -p build && echo "make $(1): building what it runs, quietly (build log: build/$(1)-build.log)"
@$(MAKE) --no-print-directory $(if $(filter -j%,$(MAKEFLAGS)),,-j2) $(2) > build/$(1)-build.log 2>&1 || \
	  { tail -n 20 build/$(1)-build.log; echo "make $(1): the build failed (whole log: build/$(1)-build.log)"; \
	    echo "0 passed, 1 failed, 0 skipped"; exit 1; }
endef
# (the checks' make, named without $(MAKE) so that make -n test does not run the tests)
TEST_MAKE := $(MAKE)
test: ## build (quietly) and run the tests a student needs; last line "N passed, M failed, K skipped" (README, "Tests": its time)
	$(call quiet_build,test,$(TEST_PROGRAMS) $(TESTS))
	@MAKE='$(TEST_MAKE)' sh tools/run-tests.sh --fixtures $(addprefix --check ,$(TEST_CHECKS)) $(TESTS)
test-long: ## what make test leaves out: the pitfall, variant and signature programs and their suites, the long sweeps in full, learned-check
	$(call quiet_build,test-long,$(TEST_LONG_PROGRAMS) $(LONG_TESTS) $(LONG_ONLY_TESTS))
	@DFLASH_TEST_LONG=1 MAKE='$(TEST_MAKE)' sh tools/run-tests.sh --fixtures --label 'long sweeps in full' --check learned-check \
	  $(filter $(LONG_TESTS) $(LONG_ONLY_TESTS),$(ALL_TESTS))
# the checks that are not suites and the fixtures (make test runs them itself)
test-pre: $(TEST_CHECKS) test-fixtures
test-fixtures: dflash-float dflash-double weights
	@sh tools/test-fixtures.sh

# llama.cpp itself (npm's node-llama-cpp 3.21.1, its prebuilt library) decodes
# `dflash gguf`'s target.gguf greedily from token ids and must give
# `dflash --mode ar`'s ids on the walkthrough and random sets (12 cases), and
# its dflash loader loads the three drafts (target_layers = ids + 1), and its
# tokenizer gives dflash tokenize's ids and bytes on tokenizer/tests/cases/texts.inp
# with the vocabularies dflash gguf writes (the learned target's, the real
# Qwen3 and Llama-3.1 ones); skipped, with the reason printed, when npm or its
# registry is unreachable. The install (~730 MB) goes to LLAMA_CHECK_DIR
# (build/llama-check); the real tokenizers come from TOKENIZER_CHECK_DIR's
# install when it has them.
# tokenizer/unicode_tables.h is generated (committed): Debian's unicode-data
# (/usr/share/unicode) -> the tokenizer's \p{L}, \p{N}, \s and NFC tables.
unicode-tables: ## regenerate tokenizer/unicode_tables.h from /usr/share/unicode (apt-get install unicode-data)
	sh tokenizer/mkunicode.sh

# make tokenizer-check: npm's tokenizers (Hugging Face's Rust library) on the real
# Qwen3 and Llama-3.1 tokenizer.json files against ours (tokenizer/tokenizer-check.sh);
# skips with the reason without npm. The install goes to build/tokenizer-check.
tokenizer-check: dflash tests/bin/test_tokenizer toy_weights/qwen3-layout/.stamp toy_weights/sliding/.stamp ## HF's tokenizers (npm) and ours agree on Qwen3, Llama-3.1, a trained and the toy sets' tokenizer.json; the speed ratio
	@tokenizer/tokenizer-check.sh

llama-check: dflash build/gguf/dflash-ggml-bf16 weights ## llama.cpp (node-llama-cpp, npm) gives --mode ar's ids from dflash gguf's files, and tokenizes as dflash tokenize; skips without npm
	@gguf/llama-check.sh

# llama.cpp's own DFlash speculative decoding (llama-speculative-simple,
# built unpatched from node-llama-cpp's bundled llama.cpp source under
# LLAMA_CHECK_DIR/spec/, never in the tracked files) on dflash gguf's pairs:
# aligned rounds propose this program's draft ids and accept as many, the
# committed ids are ours, its n_drafted / n_accept are its rounds' sums; the
# sliding set as --draft-window flash (gguf/llama-spec.sh). Skips without
# npm or cmake. Not in CI: the llama.cpp build alone took far longer than
# CI's 30-minute budget allows on a busy machine (NOTES.md, "GGUF").
llama-spec-check: dflash build/gguf/dflash-ggml-bf16 weights ## llama.cpp's speculative-simple (built from node-llama-cpp's bundled source) drafts our ids from dflash gguf's files; skips without npm
	@gguf/llama-spec.sh

# ./dflash with ggml's BF16 matmul emulated (the activations rounded to BF16
# before each weight product, gguf/ggml_bf16.c in kernel.c's place): what
# llama-spec-check compares the BF16 sets against
$(call program,build/gguf/dflash-ggml-bf16,$(R),$(filter-out kernel,$(DFLASH_SRC)) gguf/ggml_bf16,$(LDLIBS))

# make llama-bench: llama.cpp's T-token forward (node-llama-cpp's prebuilt
# library, one thread) of the learned target's F32 and BF16 GGUF files against
# this program's (build/gguf/fwdtime, the speed build's kernel), alternated
# in one run, as ratios (gguf/llama-bench.sh). Not in CI: a timing, not a test.
$(call program,build/gguf/fwdtime,$(R),gguf/fwdtime dflash kernel formats/load formats/json formats/files formats/manifest tokenizer/tokenizer,$(LDLIBS))
llama-bench: dflash build/gguf/fwdtime ## llama.cpp's T-token forward of the learned target (F32, BF16 GGUF) against ours, as ratios; skips without npm
	@gguf/llama-bench.sh

# dflash.c compiles on its own with no flags, beside dflash.h and nothing
# else, and calls nothing of the tracer, the trace-name table or the JSON reader
standalone-check: ## cc -c dflash.c alone, beside dflash.h only: no trace_*/json_* symbol undefined
	@mkdir -p build/alone && cp dflash.c dflash.h build/alone/ && \
	(cd build/alone && $(CC) -c dflash.c -o dflash-alone.o) && \
	if nm -u build/alone/dflash-alone.o | grep -w -e 'trace_[a-z_0-9]*' -e 'json_[a-z_0-9]*' -e 'dflash_trace_names*'; then \
	  echo "standalone-check: dflash.c calls into the tracer, the trace-name table or formats/json.c"; exit 1; \
	else echo "standalone-check: cc -c dflash.c needs only dflash.h; no trace_*/json_* symbol is undefined"; fi

# ---- generated docs: tools/docs.sh writes them or checks them --------------
# TRACE.md (tools/mktrace from TRACE.md.in + the name table), the walkthrough
# pages (walkthrough/tools/mkwalk), their SVGs (dflash figures) and explorer.html (dflash explore) of
# the default run, the chapter walkthrough/learned/ (walkthrough/tools/mklearned: one round of the
# learned pair, its exercises checked too), walkthrough/pitfalls.md (real runs), walkthrough/gdb.md
# (gdb), docs/performance.md and README's speed summary (the committed bench
# transcript docs/performance/bench.txt). The runs are bit-reproducible, so the files are byte-identical on
# every machine: docs-check (CI) fails when a committed one is stale.
DOCS_PROGRAMS = dflash dflash-double pitfall-programs dflash-debug weights tools/mktrace walkthrough/tools/mkwalk walkthrough/tools/mklearned walkthrough/tools/mkhybrid
docs: $(DOCS_PROGRAMS) ## regenerate every generated page and figure (then read the diff and commit)
	sh tools/docs.sh write trace-md walkthrough learned hybrid pitfalls training performance
	sh walkthrough/tools/gdb-check.sh --write
# two lanes side by side (each is one process at a time; they share no
# output): the mistakes pages' 60 real runs and diffs, and the rest; each
# lane's output is printed when both are done
docs-check: $(DOCS_PROGRAMS) walkthrough/explorer.html js-check ## check the pages' lengths and links, every generated page, the gdb guide, the explorer, the exercises (CI)
	@rc=0; d=$$(mktemp -d); \
	{ sh tools/docs.sh check pitfalls > $$d/a.log 2>&1 || echo 1 > $$d/a.rc; } & \
	{ { sh tools/doccheck.sh --selftest && sh tools/doccheck.sh || echo 1 > $$d/b.rc; \
	    sh tools/docs.sh check trace-md walkthrough learned hybrid training performance || echo 1 > $$d/b.rc; \
	    sh walkthrough/tools/gdb-check.sh || echo 1 > $$d/b.rc; \
	    sh explorer/explorer-check.sh || echo 1 > $$d/b.rc; \
	    sh walkthrough/tools/exercises-check.sh walkthrough/exercises.md || echo 1 > $$d/b.rc; \
	    for p in walkthrough/learned/README.md walkthrough/learned/README.zh.md walkthrough/hybrid/README.md walkthrough/hybrid/README.zh.md; do \
	      sh walkthrough/tools/exercises-check.sh $$p 2 || echo 1 > $$d/b.rc; done; } > $$d/b.log 2>&1; } & \
	wait; cat $$d/b.log $$d/a.log; [ -f $$d/a.rc ] || [ -f $$d/b.rc ] && rc=1; rm -rf $$d; \
	[ $$rc = 0 ] && echo "docs-check: every generated file is current and every check passed" || \
	  { echo "docs-check: FAILED (make docs regenerates; read the diff, then commit)"; exit 1; }

trace-md: tools/mktrace ## regenerate TRACE.md (the trace contract) from TRACE.md.in + the name table
	sh tools/docs.sh write trace-md
trace-md-check: dflash weights tools/mktrace ## TRACE.md, the name table and the names traced runs emit agree
	@sh tools/docs.sh check trace-md
walkthrough: dflash weights walkthrough/tools/mkwalk ## regenerate walkthrough/README.md, README.zh.md, figures/
	sh tools/docs.sh write walkthrough
walkthrough-check: dflash weights walkthrough/tools/mkwalk ## fail if the committed walkthrough/ differs from a regeneration
	@sh tools/docs.sh check walkthrough
learned-walk: dflash walkthrough/tools/mklearned ## regenerate walkthrough/learned/ (one round of the learned pair: pages, figure)
	sh tools/docs.sh write learned
learned-walk-check: dflash walkthrough/tools/mklearned ## fail if walkthrough/learned/ differs from a regeneration, or its exercises' answers fail
	@sh tools/docs.sh check learned
	@for p in walkthrough/learned/README.md walkthrough/learned/README.zh.md; do sh walkthrough/tools/exercises-check.sh $$p 2 || exit 1; done
hybrid-walk: dflash weights walkthrough/tools/mkhybrid ## regenerate walkthrough/hybrid/ (one round on the hybrid Qwen3.5 set: the rollback of its states)
	sh tools/docs.sh write hybrid
hybrid-walk-check: dflash weights walkthrough/tools/mkhybrid ## fail if walkthrough/hybrid/ differs from a regeneration, or its exercises' answers fail
	@sh tools/docs.sh check hybrid
	@for p in walkthrough/hybrid/README.md walkthrough/hybrid/README.zh.md; do sh walkthrough/tools/exercises-check.sh $$p 2 || exit 1; done
# walkthrough/explorer.html (8 MB, every value of the default run) is made,
# not committed: `make` writes it whenever ./dflash or the weights change.
walkthrough/explorer.html: dflash $(WEIGHTS)
	sh tools/docs.sh write explorer
explorer: dflash weights ## regenerate walkthrough/explorer.html (dflash explore of the default run)
	sh tools/docs.sh write explorer
# First its JavaScript's syntax (node --check; Debian: apt-get install nodejs).
explorer-check: dflash weights walkthrough/explorer.html js-check ## node --check the explorer's JavaScript, open the explorers in headless chromium
	sh explorer/explorer-check.sh
js-check: ## node --check explorer/explorer.js (the explorer's page is web/: html, css, js)
	@command -v node > /dev/null || { echo "js-check: node not found (apt-get install nodejs)"; exit 1; }
	node --check explorer/explorer.js && echo "js-check: explorer/explorer.js parses (node --check)"
exercises-check: dflash weights ## check every answer in walkthrough/exercises.md by running ./dflash
	sh walkthrough/tools/exercises-check.sh walkthrough/exercises.md
# the training runs behind walkthrough/train-pitfalls.md's table (minutes each; their results are committed)
train-pitfall-runs: dflash pitfall-programs weights ## train the clean draft and each training pitfall's (short recipe), into walkthrough/train-pitfalls/runs/
	sh walkthrough/train-pitfalls-runs.sh
pitfalls: dflash dflash-double pitfall-programs weights ## regenerate walkthrough/pitfalls.md and train-pitfalls.md from the patches and real runs
	sh tools/docs.sh write pitfalls
pitfalls-check: dflash dflash-double pitfall-programs weights ## fail if walkthrough/pitfalls.md differs from a regeneration
	@sh tools/docs.sh check pitfalls
# docs/performance.md, README's speed summary and docs/learned.md's speed statement: from the
# committed transcripts docs/performance/bench.txt (one ./dflash bench) and bench-threads2.txt (--threads 2) and toy_weights/learned/eval.tsv
performance: ## regenerate docs/performance.md, README's and learned.md's speed statements from docs/performance/bench*.txt
	sh tools/docs.sh write performance
performance-check: ## fail if docs/performance.md, README's or learned.md's speed statements differ from the transcript's numbers
	@sh tools/docs.sh check performance
# The gdb guide: walkthrough/gdb.md is generated from gdb.md.in by running its
# commands in gdb on the -O0 -g3 build (transcripts and line numbers are
# gdb's). After an edit of dflash.c moves lines, `make gdb-guide` and commit.
gdb-guide: dflash-debug weights ## regenerate walkthrough/gdb.md by running its commands in gdb
	sh walkthrough/tools/gdb-check.sh --write
gdb-check: dflash-debug weights ## fail if walkthrough/gdb.md differs from what gdb prints now
	sh walkthrough/tools/gdb-check.sh
gdb-typed-check: dflash-debug weights ## type the guide into gdb in tmux and compare the screen with gdb.md
	sh walkthrough/tools/gdb-check.sh --typed

# ---- sanitizers, valgrind, fuzzing (clang, valgrind) ---------------------
# make sanitize: every test binary and the programs the tests run built with
# ASan+UBSan (clang, build/<real>-san*/) into build/san/, then the tests run
# there (the files they read linked in) on make test's subset of the long
# sweeps, a few at a time; any sanitizer report (a leak too) fails its test
# binary and the target.
SAN_LINKS = toy_weights walkthrough tools cli formats train learned tokenizer eval gguf explorer examples Makefile README.md NOTES.md TRACE.md dflash.c dflash.h trace.c
# test_learned is left out: it decodes the learned pair (100 MB of weights)
# through the kernels test_core and test_layouts already run here, and took
# 146 s CPU under ASan (7.5 s plain), the largest share of CI's sanitize step;
# test_kernel_O0 too: the same source as test_kernel, which runs here
SAN_TESTS = $(filter-out tests/bin/test_learned tests/bin/test_kernel_O0,$(ALL_TESTS))
SAN_PROGRAMS = $(addprefix build/san/,dflash build/dflash-replay dflash-debug dflash-float dflash-double $(PITFALL_PROGRAMS) $(TRAIN_PITFALL_PROGRAMS) $(SIGNATURE_PROGRAMS) $(SAN_TESTS))
sanitize: weights $(SAN_PROGRAMS) ## the test suite under ASan+UBSan (build/san/, make test's subset)
	@for f in $(SAN_LINKS); do ln -sfn ../../$$f build/san/$$f; done
	@for d in parity signatures; do ln -sfn ../../../tests/$$d build/san/tests/$$d; done   # the committed reference files (test_parity; the wings' come with their folders)
	@cd build/san && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  sh ../../tools/test-fixtures.sh   # by the sanitized programs
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  sh tools/run-tests.sh -C build/san --label 'sanitized, make test subset' $(SAN_TESTS)

# make memcheck: valgrind on ./dflash as built by `make`: the default run
# (the walkthrough, 16 new tokens), the same run traced (--trace and
# --trace-text), a traced random-set run with block size 5, dflash diff of
# a trace with itself, dflash explore of that trace, a refused input and an
# output that is an input (exit 2, not valgrind's 1). Fails on any error and
# on any definitely or indirectly lost byte. About a minute.
memcheck: dflash weights ## valgrind memcheck on the default run and on traced runs
	sh tools/memcheck.sh

# make fuzz: each libFuzzer target for FUZZ_SECONDS, from its committed seeds
# (tests/fuzz/<target>/, read only: new inputs go to build/fuzz/corpus/).
# Deterministic seed; a crash, a leak, a sanitizer report or a slow input
# (-timeout) stops the target and fails make (the input is left in
# build/fuzz/crash-<target>-*).
FUZZ_SECONDS ?= 60
fuzz: $(patsubst %,build/fuzz/fuzz_%,$(FUZZ_TARGETS)) ## libFuzzer targets, FUZZ_SECONDS (60) each, seeds in tests/fuzz/
	@FUZZ_SECONDS=$(FUZZ_SECONDS) sh tools/fuzz.sh $(FUZZ_TARGETS)

clean: ## remove every build product and the generated weights
	rm -rf dflash dflash-debug dflash-float dflash-double examples/hook_harness .buildflags tests/bin tools/mktrace explorer/embed eval/ngram toy_weights/gen \
	       toy_weights/random toy_weights/walkthrough toy_weights/qwen3-layout toy_weights/trained toy_weights/sliding toy_weights/llama toy_weights/lm-tiny toy_weights/hybrid walkthrough/tools/mkwalk walkthrough/tools/mklearned walkthrough/tools/mkhybrid build
