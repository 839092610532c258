# dflash.c - build, weights, run, tests.
#   make            build ./dflash and generate the toy weights
#   make run        the walkthrough run ("The cat sat", block 4)
#   make test       build and run the cmocka suite (the long sweeps' subset, < 30 s)
#   make test-long  the same suite with the long sweeps in full (DFLASH_TEST_LONG=1)
#   make debug      -O0 -g3 build (./dflash-debug) for gdb
#   make bench      the kernel vs the read roofline, T-token forwards, DFlash vs target-only (one run)
#   make REAL=double   everything in double precision (./dflash writes <f8 traces)
#   make walkthrough        regenerate walkthrough/README.md, README.zh.md, SVGs, explorer.html from a fresh trace
#   make walkthrough-check  fail if the committed walkthrough/ differs from a regeneration
#   make test-long  the same suite with the long sweeps in full
#   make gdb-guide          regenerate walkthrough/gdb.md by running its commands in gdb
#   make gdb-check          fail if walkthrough/gdb.md differs from what gdb prints now
#   make gdb-typed-check    type the guide into gdb in tmux and compare the screen with gdb.md
#   make explorer           regenerate walkthrough/explorer.html (dflash explore of the default run)
#   make explorer-check     node --check the explorer's JavaScript, open the explorers in headless chromium
#   make js-check           node --check web/explorer.js (the explorer's page is web/: html, css, js)
#   make exercises-check    check every answer in walkthrough/exercises.md by running ./dflash
#   make trace-md           regenerate TRACE.md (the trace contract) from TRACE.md.in + the name table
#   make trace-md-check     fail if TRACE.md, the table, and the names traced runs emit disagree
#   make dflash-pitfall     ./dflash with the planted porting mistakes (--pitfall NAME)
#   make pitfalls           regenerate walkthrough/pitfalls.md from real runs; pitfalls-check: CI's check
#   make sanitize   the test suite under ASan+UBSan (build/san/, make test's subset)
#   make memcheck   valgrind memcheck on the default run and on a traced run
#   make fuzz       libFuzzer targets, FUZZ_SECONDS (60) each, seeds in tests/fuzz/
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

# dflash.c is the algorithm; the rest is what a program around it needs.
LIBSRC  = dflash.c json.c load.c trace.c files.c train.c
# build/explorer_page.c: the explorer's page (web/), embedded by tools/embed
SRC     = $(LIBSRC) main.c bench.c explore.c build/explorer_page.c
WEIGHTS = toy_weights/random/.stamp toy_weights/walkthrough/.stamp toy_weights/qwen3-layout/.stamp

.PHONY: all run bench test test-long standalone-check debug weights clean FORCE walkthrough walkthrough-check gdb-guide \
        gdb-check gdb-typed-check sanitize memcheck fuzz explorer explorer-check exercises-check trace-md trace-md-check \
        pitfalls pitfalls-check js-check
all: dflash weights

# .buildflags changes when the flags do (REAL=double, CFLAGS=...), so
# ./dflash is rebuilt when you switch precision.
.buildflags: FORCE
	@echo '$(CC) $(ALLFLAGS)' | cmp -s - $@ || echo '$(CC) $(ALLFLAGS)' > $@
FORCE:

dflash: $(SRC) dflash.h files.h .buildflags
	$(CC) $(ALLFLAGS) -o $@ $(SRC) $(LDLIBS)

dflash-debug: $(SRC) dflash.h
	$(CC) $(WARN) $(FPFLAGS) $(REALDEF) -O0 -g3 -D_POSIX_C_SOURCE=200809L -o $@ $(SRC) $(LDLIBS)

debug: dflash-debug weights

# ./dflash-pitfall: the same program with the planted porting mistakes
# compiled in (--pitfall NAME; dflash.h lists them). ./dflash has none.
dflash-pitfall: $(SRC) dflash.h .buildflags
	$(CC) $(ALLFLAGS) -DDFLASH_PITFALLS -o $@ $(SRC) $(LDLIBS)

# the double-precision build under its own name, for the float-vs-double test
dflash-double: $(SRC) dflash.h
	$(CC) $(WARN) $(FPFLAGS) -DDFLASH_DOUBLE $(CFLAGS) -D_POSIX_C_SOURCE=200809L -o $@ $(SRC) $(LDLIBS)

# The explorer's page is web/explorer.html, .css and .js; tools/embed inlines
# the CSS and JavaScript into the HTML and writes its bytes as C arrays that
# explore.c writes around the trace's data.
WEB = web/explorer.html web/explorer.css web/explorer.js
tools/embed: tools/embed.c
	$(CC) $(WARN) -O2 -D_POSIX_C_SOURCE=200809L -o $@ $<
build/explorer_page.c: tools/embed $(WEB)
	@mkdir -p build
	./tools/embed web/explorer.html $@ explorer_page

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
# a published checkpoint's layout (BF16, sharded target, tied embeddings), ~2 MB
toy_weights/qwen3-layout/.stamp: toy_weights/gen
	rm -rf toy_weights/qwen3-layout
	./toy_weights/gen qwen3-layout toy_weights/qwen3-layout
	touch $@

run: dflash weights
	./dflash

# the read roofline, the 1..16-token target forwards, DFlash vs target-only
# decoding and the default run, all in one run (README: Performance)
bench: dflash weights
	./dflash bench

# ---- tests (cmocka) --------------------------------------------------------
TESTS = $(patsubst tests/%.c,tests/bin/%,$(wildcard tests/test_*.c))
# test_train again in double: the finite-difference gradient checks run there
TESTS += tests/bin/test_train_double
tests/bin/test_train_double: tests/test_train.c $(SRC) dflash.h files.h train.h tests/testutil.h
	@mkdir -p tests/bin
	$(CC) $(WARN) $(FPFLAGS) -DDFLASH_DOUBLE $(CFLAGS) -D_POSIX_C_SOURCE=200809L -o $@ $< json.c trace.c files.c $(LDLIBS) -lcmocka
# test_hook uses only dflash.h and links WITHOUT trace.c: dflash.c stands alone
tests/bin/test_hook: tests/test_hook.c dflash.c json.c load.c files.c dflash.h files.h
	@mkdir -p tests/bin
	$(CC) $(ALLFLAGS) -o $@ $< dflash.c json.c load.c files.c $(LDLIBS) -lcmocka

# every other test #includes dflash.c and load.c (to reach their static functions)
tests/bin/%: tests/%.c $(SRC) dflash.h files.h train.h tests/testutil.h
	@mkdir -p tests/bin
	$(CC) $(ALLFLAGS) -o $@ $< json.c trace.c files.c $(LDLIBS) -lcmocka

# make test: every test, the long sweeps (lossless over prompts x blocks
# 1..8, the temperature chi-square) on a representative subset;
# make test-long: the same binaries with the sweeps in full (a few minutes).
# The suites run side by side (they share nothing but the read-only weights;
# make sanitize does the same), each into its own log, printed in order.
test: dflash dflash-debug dflash-double dflash-pitfall weights $(TESTS) standalone-check trace-md-check
	@rm -f tests/bin/*.log tests/bin/*.rc; \
	for t in $(TESTS); do ( ./$$t > $$t.log 2>&1; echo $$? > $$t.rc ) & done; wait; fail=0; \
	for t in $(TESTS); do echo "== $$t"; cat $$t.log; [ "$$(cat $$t.rc)" = 0 ] || { fail=1; echo "== $$t: FAILED"; }; done; \
	rm -f tests/bin/*.log tests/bin/*.rc; exit $$fail

test-long: dflash dflash-debug dflash-double dflash-pitfall weights $(TESTS)
	@set -e; for t in $(TESTS); do echo "== $$t (DFLASH_TEST_LONG=1)"; DFLASH_TEST_LONG=1 ./$$t; done

# dflash.c compiles on its own with no flags and needs nothing from trace.c
standalone-check:
	@mkdir -p tests/bin; $(CC) -c dflash.c -o tests/bin/dflash-alone.o && \
	if nm -u tests/bin/dflash-alone.o | grep -w 'trace_[a-z_]*'; then \
	  echo "standalone-check: dflash.c calls into trace.c"; exit 1; \
	else echo "standalone-check: cc -c dflash.c needs only dflash.h; no trace_* symbol is undefined"; fi

# ---- TRACE.md: the trace contract, generated from dflash.c's name table ----
# tools/mktrace #includes dflash.c: `md` prints TRACE.md.in with its
# @TRACE_NAMES@ line replaced by the table; `check` reads traces and fails
# when a name is matched by no row or by two, when a row matches nothing, or
# when a call's names are out of the table's data-flow order.
# The three runs: the default run, a random-set run with block size 6, and a
# block-size-1 run (no draft: match/cumprod are empty).
TRACE_MD_RUNS = "" "--weights toy_weights/random --prompt 'A dog saw' --block-size 6 --max-new-tokens 12 --ignore-eos" \
                "--block-size 1"

tools/mktrace: tools/mktrace.c dflash.c train.c json.c load.c files.c dflash.h files.h train.h
	$(CC) $(ALLFLAGS) -o $@ tools/mktrace.c json.c load.c files.c $(LDLIBS)

trace-md: tools/mktrace TRACE.md.in
	./tools/mktrace md TRACE.md.in > TRACE.md.tmp && mv TRACE.md.tmp TRACE.md

trace-md-check: dflash weights tools/mktrace
	@tmp=$$(mktemp -d); rc=0; \
	./tools/mktrace md TRACE.md.in > $$tmp/TRACE.md || rc=1; \
	if [ $$rc = 0 ] && ! diff -u TRACE.md $$tmp/TRACE.md > $$tmp/diff; then \
	  head -n 40 $$tmp/diff; echo "trace-md-check: TRACE.md differs from a regeneration (make trace-md, then commit)"; rc=1; \
	fi; \
	i=0; dirs=; for args in $(TRACE_MD_RUNS); do \
	  i=$$((i + 1)); eval "./dflash $$args --trace $$tmp/t$$i" > /dev/null || rc=1; dirs="$$dirs $$tmp/t$$i"; \
	done; \
	[ $$rc = 0 ] && { ./tools/mktrace check $$dirs || rc=1; }; \
	rm -rf $$tmp; \
	if [ $$rc = 0 ]; then echo "trace-md-check: TRACE.md matches the table and the names the runs emit"; \
	else echo "trace-md-check: FAILED"; fi; exit $$rc

# ---- the walkthrough (walkthrough/README.md, its figures, the gdb guide) ----
# mkwalk reads a trace of the default run and writes README.md and the SVGs.
# The trace is bit-reproducible and mkwalk prints fixed formats, so the output
# is byte-identical on every machine: walkthrough-check holds CI to it.
WALK_RUN = ./dflash --weights toy_weights/walkthrough --trace
WALK_GEN = README.md README.zh.md timeline.svg $(foreach h,0 1 2 3 4 5 6 7,attn_round1_layer0_head$(h).svg)

walkthrough/mkwalk: walkthrough/mkwalk.c
	$(CC) $(WARN) $(FPFLAGS) -O2 -D_POSIX_C_SOURCE=200809L -o $@ $< -lm

walkthrough: dflash weights walkthrough/mkwalk
	@tmp=$$(mktemp -d) && $(WALK_RUN) $$tmp/trace > /dev/null && \
	./walkthrough/mkwalk $$tmp/trace toy_weights/walkthrough/vocab.txt walkthrough && \
	$(EXPLORE) $$tmp/trace walkthrough/explorer.html; \
	rc=$$?; rm -rf $$tmp; exit $$rc

walkthrough-check: dflash weights walkthrough/mkwalk
	@tmp=$$(mktemp -d); rc=1; \
	if mkdir $$tmp/out && $(WALK_RUN) $$tmp/trace > /dev/null && \
	   ./walkthrough/mkwalk $$tmp/trace toy_weights/walkthrough/vocab.txt $$tmp/out > /dev/null && \
	   $(EXPLORE) $$tmp/trace $$tmp/explorer.html; then \
	  rc=0; \
	  cmp -s walkthrough/explorer.html $$tmp/explorer.html || \
	    { rc=1; echo "walkthrough-check: walkthrough/explorer.html differs from a regeneration (make explorer)"; }; \
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

# The trace explorer of the default run: one offline HTML page (explore.c).
# Byte-reproducible like the walkthrough; walkthrough-check compares it too.
EXPLORE = ./dflash explore --vocab toy_weights/walkthrough/vocab.txt
explorer: dflash weights
	@tmp=$$(mktemp -d) && $(WALK_RUN) $$tmp/trace > /dev/null && \
	$(EXPLORE) $$tmp/trace walkthrough/explorer.html; \
	rc=$$?; rm -rf $$tmp; [ $$rc -eq 0 ] && echo "wrote walkthrough/explorer.html ($$(wc -c < walkthrough/explorer.html) bytes)"; exit $$rc

# The explorer in a real browser (headless chromium): see the script's banner.
# First its JavaScript's syntax (node --check; Debian: apt-get install nodejs).
explorer-check: dflash weights js-check
	sh walkthrough/explorer-check.sh
js-check:
	@command -v node > /dev/null || { echo "js-check: node not found (apt-get install nodejs)"; exit 1; }
	node --check web/explorer.js && echo "js-check: web/explorer.js parses (node --check)"

# Every answer in walkthrough/exercises.md, checked by running ./dflash.
exercises-check: dflash weights
	sh walkthrough/exercises-check.sh walkthrough/exercises.md

# The gdb guide: walkthrough/gdb.md is generated from gdb.md.in by running its
# commands in gdb on the -O0 -g3 build (transcripts and line numbers are
# gdb's). After an edit of dflash.c moves lines, `make gdb-guide` and commit.
gdb-guide: dflash-debug weights
	sh walkthrough/gdb-check.sh --write

# walkthrough/pitfalls.md: every pitfall of ./dflash-pitfall on both toy sets,
# from real runs and `dflash diff` (walkthrough/mkpitfalls.sh, about a minute).
pitfalls: dflash dflash-pitfall weights
	sh walkthrough/mkpitfalls.sh walkthrough/pitfalls.md

pitfalls-check: dflash dflash-pitfall weights
	@tmp=$$(mktemp) && sh walkthrough/mkpitfalls.sh $$tmp > /dev/null && \
	if diff -u walkthrough/pitfalls.md $$tmp > $$tmp.diff; then \
	  echo "pitfalls-check: walkthrough/pitfalls.md matches a fresh regeneration"; rm -f $$tmp $$tmp.diff; \
	else head -n 40 $$tmp.diff; rm -f $$tmp $$tmp.diff; \
	  echo "pitfalls-check: FAILED: walkthrough/pitfalls.md differs from a regeneration (make pitfalls, then commit)"; exit 1; fi

gdb-check: dflash-debug weights
	sh walkthrough/gdb-check.sh
# the same session typed into gdb in a tmux pane, command by command (needs tmux)
gdb-typed-check: dflash-debug weights
	sh walkthrough/gdb-check.sh --typed

# ---- sanitizers, valgrind, fuzzing (clang, valgrind) ---------------------
# make sanitize: every test binary and the three programs the tests run
# (./dflash, ./dflash-debug, ./dflash-double) built with ASan+UBSan into
# build/san/, then the tests run there (toy_weights linked in) on make
# test's subset of the long sweeps, all at once (the machine's cores share them); any
# sanitizer report (a leak too) fails its test binary and the target.
SAN_CC   ?= clang
SANFLAGS = $(WARN) $(FPFLAGS) -g -fsanitize=address,undefined -fno-sanitize-recover=all \
           -fno-omit-frame-pointer -D_POSIX_C_SOURCE=200809L
SAN_TESTS = $(patsubst tests/%.c,build/san/tests/bin/%,$(wildcard tests/test_*.c))
SAN_ENV  = ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
           UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

build/san/dflash: $(SRC) dflash.h
	@mkdir -p build/san
	$(SAN_CC) $(SANFLAGS) -O1 -o $@ $(SRC) $(LDLIBS)
build/san/dflash-debug: $(SRC) dflash.h
	@mkdir -p build/san
	$(SAN_CC) $(SANFLAGS) -O0 -o $@ $(SRC) $(LDLIBS)
build/san/dflash-pitfall: $(SRC) dflash.h
	@mkdir -p build/san
	$(SAN_CC) $(SANFLAGS) -O1 -DDFLASH_PITFALLS -o $@ $(SRC) $(LDLIBS)
build/san/dflash-double: $(SRC) dflash.h
	@mkdir -p build/san
	$(SAN_CC) $(SANFLAGS) -O1 -DDFLASH_DOUBLE -o $@ $(SRC) $(LDLIBS)
build/san/tests/bin/test_hook: tests/test_hook.c dflash.c json.c load.c files.c dflash.h files.h
	@mkdir -p build/san/tests/bin
	$(SAN_CC) $(SANFLAGS) -O1 -o $@ $< dflash.c json.c load.c files.c $(LDLIBS) -lcmocka
build/san/tests/bin/%: tests/%.c $(SRC) dflash.h files.h tests/testutil.h
	@mkdir -p build/san/tests/bin
	$(SAN_CC) $(SANFLAGS) -O1 -o $@ $< json.c trace.c files.c $(LDLIBS) -lcmocka

sanitize: weights build/san/dflash build/san/dflash-debug build/san/dflash-double build/san/dflash-pitfall $(SAN_TESTS)
	@for f in toy_weights walkthrough README.md NOTES.md TRACE.md main.c trace.c bench.c; do \
	  ln -sfn ../../$$f build/san/$$f; done   # what the tests read (test_usage: the docs, the sources)
	@cd build/san && rm -f tests/bin/*.log tests/bin/*.rc && \
	for t in $(patsubst build/san/%,%,$(SAN_TESTS)); do \
	  ( s=$$(date +%s); $(SAN_ENV) ./$$t > $$t.log 2>&1; rc=$$?; \
	    echo "$$rc $$(( $$(date +%s) - s ))" > $$t.rc ) & \
	done; wait; fail=0; \
	for t in $(patsubst build/san/%,%,$(SAN_TESTS)); do \
	  read rc secs < $$t.rc; echo "== build/san/$$t (sanitized, make test subset): exit $$rc, $$secs s"; \
	  cat $$t.log; [ "$$rc" = 0 ] || fail=1; \
	done; exit $$fail

# make memcheck: valgrind on ./dflash as built by `make`: the default run
# (the walkthrough, 16 new tokens), the same run traced (--trace and
# --trace-text), a traced random-set run with block size 5, dflash diff of
# a trace with itself, dflash explore of that trace, a refused input and an output that is an input
# (exit 2, not valgrind's 1). Fails on any error and on any
# definitely or indirectly lost byte. About a minute.
VALGRIND = valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect \
           --show-leak-kinds=definite,indirect
memcheck: dflash weights
	@rm -rf build/memcheck && mkdir -p build/memcheck
	$(VALGRIND) ./dflash > build/memcheck/default.txt
	$(VALGRIND) ./dflash --trace build/memcheck/walk --trace-text build/memcheck/walk.txt > build/memcheck/walk-run.txt
	$(VALGRIND) ./dflash --weights toy_weights/random --prompt "A dog saw" --block-size 5 --max-new-tokens 8 \
	    --ignore-eos --trace build/memcheck/rand --trace-text build/memcheck/rand.txt > build/memcheck/rand-run.txt
	$(VALGRIND) ./dflash diff build/memcheck/rand build/memcheck/rand > build/memcheck/diff.txt
	$(VALGRIND) ./dflash explore build/memcheck/rand build/memcheck/rand.html --vocab toy_weights/random/vocab.txt
	$(VALGRIND) ./dflash --prompt "The zebra" --trace build/memcheck/walk > /dev/null 2> build/memcheck/refused.txt; \
	    test $$? = 2
	$(VALGRIND) ./dflash --trace-text toy_weights/walkthrough/vocab.txt > /dev/null 2> build/memcheck/refused-output.txt; \
	    test $$? = 2
	@echo "memcheck: 0 errors, no definitely or indirectly lost bytes"

# make fuzz: each libFuzzer target for FUZZ_SECONDS, from its committed seeds
# (tests/fuzz/<target>/, read only: new inputs go to build/fuzz/corpus/).
# Deterministic seed; a crash, a leak, a sanitizer report or a slow input
# (-timeout) stops the target and fails make (the input is left in
# build/fuzz/crash-<target>-*).
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_TARGETS = safetensors config tokenizer npy tokjson
FUZZFLAGS = $(WARN) $(FPFLAGS) -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
            -D_POSIX_C_SOURCE=200809L
build/fuzz/fuzz_npy: tests/fuzz/fuzz_npy.c $(SRC) dflash.h
	@mkdir -p build/fuzz
	$(FUZZ_CC) $(FUZZFLAGS) -o $@ $< dflash.c json.c load.c files.c $(LDLIBS)
build/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(SRC) dflash.h
	@mkdir -p build/fuzz
	$(FUZZ_CC) $(FUZZFLAGS) -o $@ $< json.c trace.c files.c $(LDLIBS)

fuzz: $(patsubst %,build/fuzz/fuzz_%,$(FUZZ_TARGETS))
	@set -e; for t in $(FUZZ_TARGETS); do \
	  echo "== fuzz $$t: $(FUZZ_SECONDS) s"; \
	  rm -rf build/fuzz/corpus/$$t && mkdir -p build/fuzz/corpus/$$t; \
	  dict=; case $$t in safetensors|config|tokjson) dict=-dict=tests/fuzz/json.dict;; esac; \
	  if ./build/fuzz/fuzz_$$t -seed=1 -max_total_time=$(FUZZ_SECONDS) -max_len=8192 -timeout=10 \
	      -rss_limit_mb=2048 -print_final_stats=1 $$dict -artifact_prefix=build/fuzz/crash-$$t- \
	      build/fuzz/corpus/$$t tests/fuzz/$$t > build/fuzz/$$t.log 2>&1; then \
	    grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss)|INFO: seed corpus' build/fuzz/$$t.log; \
	  else \
	    grep -v '^#[0-9]' build/fuzz/$$t.log; echo "fuzz $$t: FAILED (log: build/fuzz/$$t.log)"; exit 1; \
	  fi; \
	done

clean:
	rm -rf dflash dflash-debug dflash-double dflash-pitfall .buildflags tests/bin tools/mktrace tools/embed toy_weights/gen toy_weights/random \
	       toy_weights/walkthrough toy_weights/qwen3-layout \
	       walkthrough/mkwalk build
