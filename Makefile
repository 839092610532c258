# dflash.c - build, weights, run, tests.
#   make            build ./dflash and generate the toy weights
#   make run        the walkthrough run ("The cat sat", block 4)
#   make test       build and run the cmocka suite
#   make debug      -O0 -g3 build (./dflash-debug) for gdb
#   make bench      DFlash vs autoregressive decoding, measured side by side
#   make REAL=double   everything in double precision (./dflash writes <f8 traces)
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

.PHONY: all run bench test debug weights clean FORCE
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

clean:
	rm -rf dflash dflash-debug dflash-double .buildflags tests/bin toy_weights/gen toy_weights/random toy_weights/walkthrough
