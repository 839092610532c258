# dflash.c - build, weights, run, tests.
#   make            build ./dflash and generate the toy weights
#   make run        the walkthrough run ("The cat sat", block 4)
#   make test       build and run the cmocka suite
#   make debug      -O0 -g3 build (./dflash-debug) for gdb
#   make bench      DFlash vs autoregressive decoding, measured side by side
#   make REAL=double   everything in double precision (./dflash writes <f8 traces)
#   make walkthrough        regenerate walkthrough/README.md + SVGs from a fresh trace
#   make walkthrough-check  fail if the committed walkthrough/ differs from a regeneration
#   make gdb-check          run the gdb guide (walkthrough/walkthrough.gdb) and check its output
CC      ?= cc
REAL    ?= float
WARN    = -std=c11 -Wall -Wextra -Werror -pedantic
# -ffp-contract=off: no FMA contraction, so -O0 and -O2 give identical bits.
FPFLAGS = -ffp-contract=off -fno-fast-math
ifeq ($(REAL),double)
  REALDEF = -DDFLASH_DOUBLE
else ifeq ($(REAL),float)
  REALDEF =
else
  $(error REAL must be float or double, not '$(REAL)')
endif
CFLAGS  ?= -O2
ALLFLAGS = $(WARN) $(FPFLAGS) $(REALDEF) $(CFLAGS) -D_POSIX_C_SOURCE=200809L
LDLIBS  = -lm

SRC     = dflash.c trace.c
WEIGHTS = toy_weights/random/.stamp toy_weights/walkthrough/.stamp

.PHONY: all run bench test debug weights clean FORCE walkthrough walkthrough-check gdb-check
all: dflash weights

# .buildflags changes when the flags do (REAL=double, CFLAGS=...), so
# ./dflash is rebuilt when you switch precision.
.buildflags: FORCE
	@echo '$(CC) $(ALLFLAGS)' | cmp -s - $@ || echo '$(CC) $(ALLFLAGS)' > $@
FORCE:

dflash: $(SRC) dflash.h .buildflags
	$(CC) $(ALLFLAGS) -o $@ $(SRC) $(LDLIBS)

dflash-debug: $(SRC) dflash.h
	$(CC) $(WARN) $(FPFLAGS) $(REALDEF) -O0 -g3 -D_POSIX_C_SOURCE=200809L -o $@ $(SRC) $(LDLIBS)

debug: dflash-debug weights

# the double-precision build under its own name, for the float-vs-double test
dflash-double: $(SRC) dflash.h
	$(CC) $(WARN) $(FPFLAGS) -DDFLASH_DOUBLE $(CFLAGS) -D_POSIX_C_SOURCE=200809L -o $@ $(SRC) $(LDLIBS)

# The weight generator uses no libm: the files are bit-identical everywhere.
toy_weights/gen: toy_weights/gen.c
	$(CC) $(WARN) $(FPFLAGS) -O2 -D_POSIX_C_SOURCE=200809L -o $@ $<

weights: $(WEIGHTS)
toy_weights/random/.stamp: toy_weights/gen
	./toy_weights/gen random toy_weights/random
	touch $@
toy_weights/walkthrough/.stamp: toy_weights/gen
	./toy_weights/gen walkthrough toy_weights/walkthrough
	touch $@

run: dflash weights
	./dflash

# DFlash vs autoregressive on the same binary, in one run (README: Performance)
bench: dflash weights
	./dflash bench

# ---- tests (cmocka) --------------------------------------------------------
TESTS = $(patsubst tests/%.c,tests/bin/%,$(wildcard tests/test_*.c))
tests/bin/%: tests/%.c $(SRC) dflash.h tests/testutil.h
	@mkdir -p tests/bin
	$(CC) $(ALLFLAGS) -DDFLASH_NO_MAIN -o $@ $< trace.c $(LDLIBS) -lcmocka

test: dflash dflash-debug dflash-double weights $(TESTS)
	@set -e; for t in $(TESTS); do echo "== $$t"; ./$$t; done

# ---- the walkthrough (walkthrough/README.md, its figures, the gdb guide) ----
# mkwalk reads a trace of the default run and writes README.md and the SVGs.
# The trace is bit-reproducible and mkwalk prints fixed formats, so the output
# is byte-identical on every machine: walkthrough-check holds CI to it.
WALK_RUN = ./dflash --weights toy_weights/walkthrough --trace
WALK_GEN = README.md timeline.svg $(foreach h,0 1 2 3 4 5 6 7,attn_round1_layer0_head$(h).svg)

walkthrough/mkwalk: walkthrough/mkwalk.c
	$(CC) $(WARN) $(FPFLAGS) -O2 -D_POSIX_C_SOURCE=200809L -o $@ $< -lm

walkthrough: dflash weights walkthrough/mkwalk
	@tmp=$$(mktemp -d) && $(WALK_RUN) $$tmp/trace > /dev/null && \
	./walkthrough/mkwalk $$tmp/trace toy_weights/walkthrough/vocab.txt walkthrough; \
	rc=$$?; rm -rf $$tmp; exit $$rc

walkthrough-check: dflash weights walkthrough/mkwalk
	@tmp=$$(mktemp -d); rc=1; \
	if mkdir $$tmp/out && $(WALK_RUN) $$tmp/trace > /dev/null && \
	   ./walkthrough/mkwalk $$tmp/trace toy_weights/walkthrough/vocab.txt $$tmp/out > /dev/null; then \
	  rc=0; \
	  for f in $(WALK_GEN); do \
	    diff -u walkthrough/$$f $$tmp/out/$$f > $$tmp/diff || { rc=1; head -n 40 $$tmp/diff; }; \
	  done; \
	  for f in $$tmp/out/*; do \
	    case " $(WALK_GEN) " in *" $${f##*/} "*) ;; \
	      *) echo "walkthrough-check: mkwalk wrote $${f##*/}, which WALK_GEN does not list"; rc=1;; esac; \
	  done; \
	  for f in walkthrough/*.svg; do \
	    [ -e $$tmp/out/$${f##*/} ] || { echo "walkthrough-check: $$f is no longer generated"; rc=1; }; \
	  done; \
	fi; \
	rm -rf $$tmp; \
	if [ $$rc -eq 0 ]; then echo "walkthrough-check: walkthrough/ matches a fresh regeneration"; \
	else echo "walkthrough-check: FAILED: walkthrough/ differs from a regeneration (make walkthrough, then commit)"; fi; \
	exit $$rc

# The gdb guide (walkthrough/gdb.md), run as written on the -O0 -g3 build.
gdb-check: dflash-debug weights
	sh walkthrough/gdb-check.sh

clean:
	rm -rf dflash dflash-debug dflash-double .buildflags tests/bin toy_weights/gen toy_weights/random toy_weights/walkthrough \
	       walkthrough/mkwalk
