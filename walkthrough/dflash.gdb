# walkthrough/dflash.gdb - short gdb commands for the DFlash walkthrough.
#
#   make debug                 # ./dflash-debug (-O0 -g3) and the toy weights
#   gdb -q ./dflash-debug
#   (gdb) source walkthrough/dflash.gdb
#   (gdb) step1
#
# One command per step of walkthrough/README.md. Each runs the program (or
# starts it) to the end of that step in the current round, or in the next
# round when the current one is past it, and prints what the walkthrough
# shows there, read from memory:
#
#   step1          Step 1, the prefill: logits, first token, target_hidden
#   step2          Step 2: C = hidden_norm(fc(target_hidden))
#   step3          Step 3: the block, its embedding, the position ids
#   step4 [K]      Step 4: with no K, stop where draft layer 0 starts (4.1
#                  next, to step through with `next`); with K = 1..5, run to
#                  the end of sub-step 4.K of the current or next draft layer
#   step5          Step 5: the draft's logits and proposals
#   step6          Step 6: verification, match, cumprod, acceptance length
#   step7          Step 7: start, output_ids, both cache crops
#   round R        the start of round R (restarts the program if R is behind)
#   draft-layer L  the start of draft layer L (4.1 next) in the current or next round
#   target-layer L the MLP of target layer L in the next target forward
#
# and helpers that print what is in memory at the current stop:
#
#   ptensor EXPR ROWS COLS [ROW_STRIDE]   a row-major buffer as a matrix
#   pattn HEAD     the attention weights of one head, context | block marked
#   pblock         the block as words, with its positions
#
# All of them print with gdb.write (like printf): nothing goes into gdb's
# value history, so `$1`, `$2` ... stay yours. They stop at functions and at
# comment lines of dflash.c found by their text (e.g. "/* ---- Step 6"),
# never at line numbers written here, so edits of dflash.c do not break them.
# walkthrough/gdb.md is the guided session; `make gdb-check` replays it.

set pagination off

python
import os
import struct

import gdb

# ---------------------------------------------------------------------------
# dflash.c's source, and lines found by their text

_src_cache = {}


def _source():
    """The lines of dflash.c as compiled into the program (path from its symtab)."""
    sym = gdb.lookup_global_symbol("dflash_generate")
    if sym is None:
        raise gdb.GdbError("dflash.gdb: no dflash_generate here; load ./dflash-debug first "
                           "(gdb -q ./dflash-debug)")
    path = sym.symtab.fullname()
    prog = gdb.current_progspace().filename
    if prog and os.path.getmtime(path) > os.path.getmtime(prog):
        raise gdb.GdbError("dflash.gdb: %s is newer than %s, so its lines may not be the program's: "
                           "`make debug`, then `file %s`" % (path, prog, prog))
    key = (path, os.path.getmtime(path))  # read again after an edit and a rebuild
    if key not in _src_cache:
        with open(path) as f:
            _src_cache[key] = f.read().split("\n")
    return _src_cache[key]


def _function_lines(func):
    """(first, last) line of a function's body: its definition to its closing brace."""
    sym = gdb.lookup_global_symbol(func) or gdb.lookup_static_symbol(func)
    if sym is None:
        raise gdb.GdbError("dflash.gdb: no function %s in the program" % func)
    lines = _source()
    first = sym.line
    for i in range(first, len(lines) + 1):
        if lines[i - 1] == "}":
            return first, i
    raise gdb.GdbError("dflash.gdb: cannot find the end of %s in dflash.c" % func)


def marker_line(func, text):
    """The line of dflash.c inside func that starts with text (a comment; it must occur once)."""
    first, last = _function_lines(func)
    lines = _source()
    hits = [i for i in range(first, last + 1) if lines[i - 1].lstrip().startswith(text)]
    if len(hits) != 1:
        raise gdb.GdbError("dflash.gdb: \"%s\" occurs %d times in %s (dflash.c), expected once; "
                           "update the marker in walkthrough/dflash.gdb" % (text, len(hits), func))
    return hits[0]


def end_line(func):
    """The closing brace of func: a stop there sees everything the function computed."""
    return _function_lines(func)[1]


# ---------------------------------------------------------------------------
# Reading memory

def _int(expr):
    return int(gdb.parse_and_eval(expr))


def _reals(ptr, n):
    """n values of type real (float or double) starting at the pointer value ptr."""
    size = gdb.lookup_type("real").strip_typedefs().sizeof
    addr = int(ptr.cast(gdb.lookup_type("unsigned long")))
    mem = gdb.selected_inferior().read_memory(addr, n * size)
    return list(struct.unpack("<%d%s" % (n, "f" if size == 4 else "d"), bytes(mem)))


def _ints(ptr, n):
    addr = int(ptr.cast(gdb.lookup_type("unsigned long")))
    mem = gdb.selected_inferior().read_memory(addr, n * 4)
    return list(struct.unpack("<%di" % n, bytes(mem)))


def out(fmt, *args):
    gdb.write((fmt % args).rstrip() + "\n")


def _frame(name):
    """The innermost frame of function name, from the selected frame outward."""
    f = gdb.selected_frame()
    while f is not None:
        if f.name() == name:
            return f
        f = f.older()
    return None


def _in_frame(name, fn):
    """Run fn() with the frame of function name selected, then select the old frame again."""
    old = gdb.selected_frame()
    f = _frame(name) or _frame_anywhere(name)
    if f is None:
        raise gdb.GdbError("dflash.gdb: %s is not on the stack here" % name)
    f.select()
    try:
        return fn()
    finally:
        old.select()


def _frame_anywhere(name):
    f = gdb.newest_frame()
    while f is not None:
        if f.name() == name:
            return f
        f = f.older()
    return None


_words = None


def word(i):
    """The word of token id i (main's vocabulary)."""
    global _words
    if _words is None:
        def load():
            n = _int("r.vocab.n")
            w = gdb.parse_and_eval("r.vocab.words")
            return [w[k].string() for k in range(n)]
        _words = _in_frame("main", load)
    return _words[i] if 0 <= i < len(_words) else "<?>"


def words(ids):
    return " ".join(word(i) for i in ids)


def _argmax(xs):
    best = 0
    for i in range(1, len(xs)):
        if xs[i] > xs[best]:
            best = i
    return best


def _top(xs, k):
    """the k largest (value, index), first index on ties"""
    return sorted(((x, i) for i, x in enumerate(xs)), key=lambda p: (-p[0], p[1]))[:k]


def _rms(xs):
    return (sum(x * x for x in xs) / len(xs)) ** 0.5


def _round():
    """The round dflash_generate is in (0 during the prefill), or None when it is not running."""
    if gdb.selected_inferior().pid == 0:
        return None
    f = _frame_anywhere("dflash_generate")
    if f is None:
        return None
    return _in_frame("dflash_generate", lambda: _int("res->n_rounds"))


def _where(label):
    f = gdb.selected_frame()
    sal = f.find_sal()
    line = sal.line
    out("%s   (%s, dflash.c:%d)", label, f.name(), line)
    out("%d\t%s", line, _source()[line - 1] if line else "")


# ---------------------------------------------------------------------------
# Running to a point: a silent temporary breakpoint of our own, then
# continue (or run). A stop at one of the user's breakpoints first, or the
# end of the program, is reported instead.

class _Stop(gdb.Breakpoint):
    def __init__(self, spec, cond):
        super().__init__(spec, internal=True, temporary=True)
        self.silent = True
        self.cond = cond
        self.reached = False

    def stop(self):
        if self.cond is not None and not self.cond():
            return False
        self.reached = True
        return True


def _running():
    return gdb.selected_inferior().pid != 0


def _quietly(cmd):
    gdb.execute(cmd, to_string=True)


def _restart():
    confirm = gdb.parameter("confirm")
    gdb.execute("set confirm off")
    try:
        if _running():
            _quietly("kill")
    finally:
        gdb.execute("set confirm %s" % ("on" if confirm else "off"))


def run_to(spec, cond, what):
    """Run to spec (a location) where cond() holds; True when there."""
    bp = _Stop(spec, cond)
    try:
        if _running():
            _quietly("continue")
        else:
            global _words
            _words = None  # the new run may load other weights
            _quietly("run")
    finally:
        reached = bp.reached
        if bp.is_valid():
            bp.delete()
    if reached:
        return True
    if not _running():
        code = gdb.convenience_variable("_exitcode")
        out("The program ended (exit code %s) before %s.", code, what)
        out("Type `step1` or `round 1` to start it again.")
    else:
        out("(stopped above, before %s: the same command goes on from here)", what)
    return False


def _is_caller(name):
    f = gdb.newest_frame().older()
    return f is not None and f.name() == name


_commands = {}


def dflash_command(name):
    """Register fn(args: list of str, from_tty) as the gdb command name."""
    def register(fn):
        class C(gdb.Command):
            __doc__ = fn.__doc__

            def __init__(self):
                super().__init__(name, gdb.COMMAND_USER)

            def invoke(self, arg, from_tty):
                try:
                    fn(gdb.string_to_argv(arg))
                except gdb.GdbError:
                    raise
                except gdb.error as e:  # e.g. a variable that is not there at this stop
                    raise gdb.GdbError("%s: %s" % (name, e))
        C()
        _commands[name] = fn
        return fn
    return register


def _need(args, n, usage):
    if len(args) != n:
        raise gdb.GdbError("usage: " + usage)


def _need_stop(what):
    if not _running():
        raise gdb.GdbError("%s: the program is not running; step1, round R or any step command starts it" % what)


def _num(arg, what):
    """an integer argument: a number or an expression of the program"""
    try:
        return int(gdb.parse_and_eval(arg))
    except (gdb.error, ValueError):
        raise gdb.GdbError("%s: expected a number, got '%s'" % (what, arg))


def _check_layer(L, cfg, what):
    """L must be a layer of the model whose config dflash_generate calls cfg"""
    if _round() is None:
        return
    n = _in_frame("dflash_generate", lambda: _int("%s ? %s->num_hidden_layers : 0" % (cfg, cfg)))
    if not 0 <= L < n:
        raise gdb.GdbError("%s: the %s has layers 0..%d, not %d" % (what, "draft" if cfg == "dcfg" else "target",
                                                                    n - 1, L))


# ---------------------------------------------------------------------------
# The steps

@dflash_command("step1")
def step1(args):
    """Step 1: run the prefill, stop as round 1 starts.
Usage: step1. Prints the prompt, the prefill's logits, the first new token
and target_hidden = extract_context_feature(hidden_states). Starts the
program again when round 1 is already under way."""
    _need(args, 0, "step1")
    r = _round()
    if r is not None and r >= 1:
        out("(round %d is under way; Step 1 is the prefill: starting the program again)", r)
        _restart()
    line = marker_line("dflash_generate", "/* ---- Step 3")
    if not run_to("dflash.c:%d" % line, lambda: _int("res->n_rounds") == 1, "the end of the prefill"):
        return
    n = _int("n")
    V = _int("V")
    D = _int("tcfg->hidden_size")
    k = _int("n_ids")
    ids = _ints(gdb.parse_and_eval("input_ids"), n)
    _where("== Step 1: the prefill is done, round 1 starts here")
    out("target_forward read the prompt, %d tokens at positions 0..%d: %s (ids %s)",
        n, n - 1, words(ids), " ".join(map(str, ids)))
    logits = _reals(gdb.parse_and_eval("tr->logits"), V)
    (v1, i1), (v2, i2) = _top(logits, 2)
    out("tr->logits [1, %d] (last position only): argmax %s (%d) %.4f, runner-up %s %.4f",
        V, word(i1), i1, v1, word(i2), v2)
    first = _int("output_ids[n]")
    out("output_ids[%d] = %d (%s): the first new token, the anchor of round 1", n, first, word(first))
    lids = [_int("dcfg->target_layer_ids[%d]" % j) for j in range(k)]
    out("target_hidden [%d, %d] = cat of hidden_states[id + 1] for target_layer_ids %s:",
        n, k * D, " ".join(map(str, lids)))
    th = _reals(gdb.parse_and_eval("target_hidden"), n * k * D)
    for t in range(n):
        cells = []
        for j in range(k):
            s = th[(t * k + j) * D:(t * k + j + 1) * D]
            cells.append("hs[%d]: dim %d = %.4f, RMS %.4f" % (lids[j] + 1, ids[t], s[ids[t]], _rms(s)))
        out("  row %d %-5s %s", t, word(ids[t]), "   ".join(cells))


@dflash_command("step2")
def step2(args):
    """Step 2: run to C = hidden_norm(fc(target_hidden)) and print it.
Usage: step2. Stops in draft_forward, in the current or next round."""
    _need(args, 0, "step2")
    line = marker_line("draft_forward", "/* Step 3:")
    if not run_to("dflash.c:%d" % line, None, "Step 2"):
        return
    Lc = _int("Lc")
    D = _int("D")
    c0 = _int("cache->len")
    _where("== Step 2, round %d: C = hidden_norm(fc(target_hidden)) is ready" % _round())
    out("r->C [Lc, D] = [%d, %d]: one row per context position %d..%d (the positions the draft cache has not seen)",
        Lc, D, c0, c0 + Lc - 1)
    C = _reals(gdb.parse_and_eval("r->C"), Lc * D)
    out("          dims 0..3 (token dims)                dims 36..41 (planted)                              dim 511")
    for t in range(Lc):
        row = C[t * D:(t + 1) * D]
        out("  row %d  %s   %s   %8.4f", t, " ".join("%8.4f" % x for x in row[0:4]),
            " ".join("%8.4f" % x for x in row[36:42]), row[511])


@dflash_command("step3")
def step3(args):
    """Step 3: run to the block's embedding and print the block.
Usage: step3. Stops in draft_forward, in the current or next round, and
prints the block, noise_embedding = embed_tokens(block), the position ids."""
    _need(args, 0, "step3")
    line = marker_line("draft_forward", "/* Step 4:")
    if not run_to("dflash.c:%d" % line, None, "Step 3"):
        return
    B = _int("B")
    D = _int("D")
    Lc = _int("Lc")
    P = _int("P")
    blk = _ints(gdb.parse_and_eval("block"), B)
    pos = _ints(gdb.parse_and_eval("r->pos"), P)
    _where("== Step 3, round %d: the block and its embedding" % _round())
    out("block [%d] at positions %d..%d: %s (ids %s)", B, pos[Lc], pos[Lc + B - 1], words(blk),
        " ".join(map(str, blk)))
    out("r->noise_embedding [B, D] = [%d, %d] = embed_tokens(block):", B, D)
    E = _reals(gdb.parse_and_eval("r->noise_embedding"), B * D)
    for t in range(B):
        row = E[t * D:(t + 1) * D]
        i = _argmax(row)
        rest = max(abs(x) for j, x in enumerate(row) if j != i)
        out("  row %d (position %d, %s): %.4f at dim %d, largest |value| elsewhere %.4f",
            t, pos[Lc + t], word(blk[t]), row[i], i, rest)
    out("r->pos (position_ids) [Lc+B] = [%d]: %s | %s", P, " ".join(map(str, pos[:Lc])),
        " ".join(map(str, pos[Lc:])))
    out("  keys: all %d (context | block); queries: the last %d", P, B)


def _layer_header(step, what):
    l = _int("l")
    B = _int("B")
    Lc = _int("Lc")
    S = _int("S")
    c0 = _int("cache->len")
    _where("== Step %s, round %d, draft layer %d: %s" % (step, _round(), l, what))
    return l, B, Lc, S, c0


@dflash_command("draft-layer")
def draft_layer_cmd(args):
    """Run to the start of draft layer L (Step 4.1 next).
Usage: draft-layer L. In the current or next round; prints the layer's
normed input X = a->xb. `next` steps through the layer from there."""
    _need(args, 1, "draft-layer L")
    L = _num(args[0], "draft-layer L")
    _check_layer(L, "dcfg", "draft-layer")
    line = marker_line("draft_layer", "/* 4.1")
    if not run_to("dflash.c:%d" % line, lambda: _int("l") == L, "draft layer %d" % L):
        return
    _draft_layer_start()


def _draft_layer_start():
    l, B, Lc, S, c0 = _layer_header("4", "the layer starts, 4.1 is next")
    D = _int("D")
    out("X = a->xb = input_layernorm(h) [B, D] = [%d, %d] is ready; Q, K, V, RoPE, attention come next.", B, D)
    out("keys this layer: S = %d = %d in the draft cache + Lc %d context rows + B %d block rows",
        S, c0, Lc, B)
    X = _reals(gdb.parse_and_eval("a->xb"), B * D)
    for t in range(B):
        row = X[t * D:(t + 1) * D]
        (v, i), = _top(row, 1)
        out("  X row %d (position %d): largest %.4f at dim %d, RMS %.4f",
            t, _int("r->pos[%d]" % (Lc + t)), v, i, _rms(row))


def _sub_end(K):
    """(spec, label) of the end of sub-step 4.K in draft_layer"""
    if K < 5:
        return "dflash.c:%d" % marker_line("draft_layer", "/* 4.%d" % (K + 1))
    return "dflash.c:%d" % end_line("draft_layer")


@dflash_command("step4")
def step4(args):
    """Step 4: run to draft layer 0, or to the end of sub-step 4.K.
Usage: step4 [K]. With no K, stop where draft layer 0 starts (Step 4, the
KV injection), to step through it with `next`. With K = 1..5, run to the
end of sub-step 4.K in the current or next draft layer and print it:
4.1 Q, 4.2 K (context and block rows), 4.3 RoPE, 4.4 attention, 4.5 output."""
    if len(args) == 0:
        line = marker_line("draft_layer", "/* 4.1")
        if run_to("dflash.c:%d" % line, lambda: _int("l") == 0, "draft layer 0"):
            _draft_layer_start()
        return
    _need(args, 1, "step4 [K]   (K = 1..5)")
    K = _num(args[0], "step4 K")
    if not 1 <= K <= 5:
        raise gdb.GdbError("step4: K must be 1..5 (4.1 Q ... 4.5 output), not %d" % K)
    if not run_to(_sub_end(K), None, "the end of Step 4.%d" % K):
        return
    [None, _s41, _s42, _s43, _s44, _s45][K]()


def _s41():
    l, B, Lc, S, c0 = _layer_header("4.1", "done, q = q_norm(q_proj(X))")
    H, d = _int("H"), _int("d")
    out("a->q [B, H*d] = [%d, %d]; head 1 of block row t starts at a->q + t*H*d + 1*d:", B, H * d)
    q = _reals(gdb.parse_and_eval("a->q"), B * H * d)
    out("  head 1        dim 0     dim 31     dim 32")
    for t in range(B):
        h = q[t * H * d + d:t * H * d + 2 * d]
        out("  row %d (q@%d) %8.4f  %9.4f  %9.4f", t, _int("r->pos[%d]" % (Lc + t)), h[0], h[31], h[32])


def _s42():
    l, B, Lc, S, c0 = _layer_header("4.2", "done, K and V from [C ; X] through the same k_proj, v_proj")
    P, kvd, d = _int("P"), _int("kvd"), _int("d")
    out("a->k [Lc+B, Hkv*d] = [%d, %d]: rows 0..%d are C W_K (context), rows %d..%d X W_K (block)",
        P, kvd, Lc - 1, Lc, P - 1)
    k = _reals(gdb.parse_and_eval("a->k"), P * kvd)
    out("  head 1              dim 0     dim 16     dim 31")
    for j in range(P):
        h = k[j * kvd + d:j * kvd + 2 * d]
        out("  row %d (k@%d) %s %8.4f  %9.4f  %9.4f", j, _int("r->pos[%d]" % j),
            "context" if j < Lc else "block  ", h[0], h[16], h[31])


def _s43():
    l, B, Lc, S, c0 = _layer_header("4.3", "done, RoPE: keys at all Lc+B positions, queries at the last B")
    P, d, H, kvd = _int("P"), _int("d"), _int("H"), _int("kvd")
    ang = _reals(gdb.parse_and_eval("r->angles"), P * (d // 2))
    cs = _reals(gdb.parse_and_eval("r->cos"), P * d)
    sn = _reals(gdb.parse_and_eval("r->sin"), P * d)
    out("r->angles [P, d/2], r->cos, r->sin [P, d]: pair 0 (angle = position) and pair %d", d // 2 - 1)
    for p in range(P):
        out("  position %d  angle %7.4f  cos %7.4f  sin %7.4f  |  pair %d angle %.4e",
            _int("r->pos[%d]" % p), ang[p * (d // 2)], cs[p * d], sn[p * d], d // 2 - 1,
            ang[p * (d // 2) + d // 2 - 1])
    if B > 2 and Lc > 0:
        qt, kj = 2, Lc - 1
        q = _reals(gdb.parse_and_eval("a->q_rope"), B * H * d)[qt * H * d:qt * H * d + d]
        kk = _reals(gdb.parse_and_eval("a->k_rope"), P * kvd)[kj * kvd:kj * kvd + d]
        s = sum(float(a) * float(b) for a, b in zip(q, kk))
        out("head 0: q'@%d . k'@%d = %.4f (a->q_rope row %d . a->k_rope row %d), score / sqrt(d) = %.4f",
            _int("r->pos[%d]" % (Lc + qt)), _int("r->pos[%d]" % kj), s, qt, kj, s / d ** 0.5)


def _s44():
    l, B, Lc, S, c0 = _layer_header("4.4", "done, attention over the draft cache, non-causal")
    H = _int("H")
    out("a->att [H, B, S] = [%d, %d, %d]: keys %d..%d are context, %d..%d the block", H, B, S,
        0, S - B - 1, S - B, S - 1)
    _pattn(1)
    att = _reals(gdb.parse_and_eval("a->att"), H * B * S)
    for h in range(1, min(4, H, B)):
        row = att[(h * B + h) * S:(h * B + h + 1) * S]
        i = _argmax(row)
        out("head %d, query %d places after the anchor (q@%d): largest weight %.4f on k@%d",
            h, h, S - B + h, row[i], i)


def _s45():
    l, B, Lc, S, c0 = _layer_header("4.5", "done, o_proj, residual, MLP: the layer output is ready")
    D = _int("D")
    ao = _reals(gdb.parse_and_eval("a->attn_output"), B * D)
    out("a->attn_output [B, D] = [%d, %d]: the three largest components of each row (dims < 36 are words):", B, D)
    for t in range(B):
        row = ao[t * D:(t + 1) * D]
        cells = []
        for v, i in _top(row, 3):
            cells.append("%.4f at %d%s" % (v, i, " (%s)" % word(i) if i < 36 else ""))
        out("  row %d (position %d): %s", t, _int("r->pos[%d]" % (Lc + t)), ", ".join(cells))
    out("a->out = h + attn_output + MLP is the next layer's h")


@dflash_command("step5")
def step5(args):
    """Step 5: run to the draft's logits and print the proposals.
Usage: step5. Stops at the end of draft_forward, in the current or next round."""
    _need(args, 0, "step5")
    if not run_to("dflash.c:%d" % end_line("draft_forward"), None, "Step 5"):
        return
    B, V, Lc = _int("B"), _int("V"), _int("Lc")
    start = _int("r->pos[Lc]")
    _where("== Step 5, round %d: the draft's logits" % _round())
    out("r->logits [B-1, V] = [%d, %d] = lm_head(norm(h)[1:]); the argmax of each row is the proposal:", B - 1, V)
    lg = _reals(gdb.parse_and_eval("r->logits"), (B - 1) * V)
    for i in range(B - 1):
        (v1, i1), (v2, i2) = _top(lg[i * V:(i + 1) * V], 2)
        out("  row %d (position %d): %-6s %.4f   runner-up %-6s %.4f", i, start + 1 + i, word(i1), v1, word(i2), v2)


@dflash_command("step6")
def step6(args):
    """Step 6: run past the verification and print the acceptance.
Usage: step6. Prints the block, the target's posterior, match, cumprod and
the acceptance length, in the current or next round."""
    _need(args, 0, "step6")
    line = marker_line("dflash_generate", "/* ---- Step 7")
    if not run_to("dflash.c:%d" % line, None, "Step 6"):
        return
    B = _int("B")
    s0 = _int("start")
    blk = _ints(gdb.parse_and_eval("block"), B)
    post = _ints(gdb.parse_and_eval("posterior"), B)
    match = _ints(gdb.parse_and_eval("ri->match"), B - 1)
    cum = _ints(gdb.parse_and_eval("ri->cumprod"), B - 1)
    _where("== Step 6, round %d: the target verified the block in one forward" % _round())
    out("  i  position  token in   target's next (posterior[i])   draft's guess block[i+1]  match  cumprod")
    for i in range(B):
        if i + 1 < B:
            out("  %d  %8d  %-8s   %-29s  %-24s  %5d  %7d", i, s0 + i, word(blk[i]), word(post[i]),
                word(blk[i + 1]), match[i], cum[i])
        else:
            out("  %d  %8d  %-8s   %-29s  %-24s", i, s0 + i, word(blk[i]), word(post[i]), "(none)")
    out("acc = %d: keep block[:%d] = %s, then the bonus posterior[%d] = %s", _int("acc"), _int("acc") + 1,
        words(blk[:_int("acc") + 1]), _int("acc"), word(post[_int("acc")]))


@dflash_command("step7")
def step7(args):
    """Step 7: run to the end of the round and print the state update.
Usage: step7. Prints start, output_ids, the target cache crop, and the
draft cache crop (made right after the draft forward)."""
    _need(args, 0, "step7")
    line = marker_line("dflash_generate", "/* stop if any stop id")
    if not run_to("dflash.c:%d" % line, None, "Step 7"):
        return
    s0 = _int("ri->start_before")
    s1 = _int("start")
    acc = _int("acc")
    _where("== Step 7, round %d: the state update" % _round())
    ids = _ints(gdb.parse_and_eval("output_ids + ri->start_before"), s1 - s0 + 1)
    out("start = %d + acc %d + 1 = %d; output_ids[%d..%d] = %s", s0, acc, s1, s0, s1, words(ids))
    out("target cache: crop(%d) keeps positions 0..%d: len %d", s1, s1 - 1, _int("past_key_values_target->len"))
    out("draft cache: crop(%d) right after the draft forward kept only context K/V: len %d -> %d",
        s0, _int("ri->draft_cache_before"), _int("past_key_values_draft->len"))
    out("n_ctx = %d rows of target_hidden (positions %d..%d) go to the draft next round",
        _int("n_ctx"), s0, s0 + _int("n_ctx") - 1)


@dflash_command("round")
def round_cmd(args):
    """Run to the start of round R.
Usage: round R. Starts the program again when round R is already under
way or over; prints start and the cache lengths the round starts from."""
    _need(args, 1, "round R")
    R = _num(args[0], "round R")
    if R < 1:
        raise gdb.GdbError("round: R counts from 1")
    r = _round()
    if r is not None and r >= R:
        out("(round %d is under way: starting the program again)", r)
        _restart()
    line = marker_line("dflash_generate", "/* ---- Step 3")
    if not run_to("dflash.c:%d" % line, lambda: _int("res->n_rounds") == R, "round %d" % R):
        return
    s = _int("start")
    B = _int("B")
    _where("== round %d starts" % R)
    out("start = %d: the block will be output_ids[%d..%d], anchor %s; draft cache len %d, target cache len %d",
        s, s, s + B - 1, word(_int("output_ids[start]")), _int("past_key_values_draft->len"),
        _int("past_key_values_target->len"))
    out("the draft gets n_ctx = %d new context rows (positions %d..%d)", _int("n_ctx"),
        _int("past_key_values_draft->len"), _int("past_key_values_draft->len") + _int("n_ctx") - 1)


@dflash_command("target-layer")
def target_layer_cmd(args):
    """Run to the MLP of target layer L in the next target forward.
Usage: target-layer L. Stops where mlp_block starts, in the prefill or a
verification; `next` steps through it, `finish` runs it to its end."""
    _need(args, 1, "target-layer L")
    L = _num(args[0], "target-layer L")
    _check_layer(L, "tcfg", "target-layer")
    if not run_to("mlp_block", lambda: _int("l") == L and _is_caller("target_forward"),
                  "target layer %d" % L):
        return
    T, D, I = _int("T"), _int("c->hidden_size"), _int("c->intermediate_size")
    r = _round()
    what = "the prefill" if r == 0 else "the verification of round %d" % r
    _where("== target layer %d, %s: the MLP starts" % (L, what))
    out("a->h_mid [T, D] = [%d, %d] = h + attn_output comes in; out = h_mid + down_proj(silu(gate_proj(x)) * up_proj(x)),",
        T, D)
    out("x = post_attention_layernorm(h_mid); gate, up, act are [T, I] = [%d, %d]", T, I)
    ids = _in_frame("target_forward", lambda: _ints(gdb.parse_and_eval("ids"), T))
    p0 = _in_frame("target_forward", lambda: _int("past"))
    hm = _reals(gdb.parse_and_eval("a->h_mid"), T * D)
    for t in range(T):
        row = hm[t * D:(t + 1) * D]
        out("  row %d (position %d, %s): h_mid[%d] = %.4f, RMS %.4f", t, p0 + t, word(ids[t]), ids[t],
            row[ids[t]], _rms(row))


# ---------------------------------------------------------------------------
# Helpers

@dflash_command("ptensor")
def ptensor(args):
    """Print a row-major buffer as a matrix.
Usage: ptensor EXPR ROWS COLS [ROW_STRIDE]. Prints ROWS x COLS values of
the buffer starting at EXPR (a pointer to real), with its shape. Rows
are ROW_STRIDE values apart (default COLS), so `ptensor r->C+36 Lc 6 D` is
columns 36..41 of C. ROWS, COLS, ROW_STRIDE may be expressions (B, H*d)."""
    if len(args) not in (3, 4):
        raise gdb.GdbError("usage: ptensor EXPR ROWS COLS [ROW_STRIDE]")
    _need_stop("ptensor")
    p = gdb.parse_and_eval(args[0])
    rows = _num(args[1], "ptensor ROWS")
    cols = _num(args[2], "ptensor COLS")
    stride = _num(args[3], "ptensor ROW_STRIDE") if len(args) == 4 else cols
    head = "%s  [%d, %d]" % (args[0], rows, cols)
    if stride != cols:
        head += "  (row stride %d)" % stride
    out("%s", head)
    for i in range(rows):
        row = _reals(p + i * stride, cols)
        out("  [%d]%s", i, "".join(" %9.4f" % x for x in row))


def _pattn(h):
    f = gdb.selected_frame()
    while f is not None and f.name() not in ("attention", "draft_layer", "target_forward"):
        f = f.older()
    if f is None:
        raise gdb.GdbError("pattn: no draft_layer, target_forward or attention on the stack here")
    old = gdb.selected_frame()
    f.select()
    try:
        name = f.name()
        if name == "attention":
            att, T, S = "att", _int("T"), _int("S")
        else:
            att, T, S = "a->att", _int("B" if name == "draft_layer" else "T"), _int("S")
        H = _int("n_heads" if name == "attention" else "H")
        if not 0 <= h < H:
            raise gdb.GdbError("pattn: HEAD must be 0..%d" % (H - 1))
        w = _reals(gdb.parse_and_eval(att) + h * T * S, T * S)
    finally:
        old.select()
    ctx = "context" if name != "target_forward" else "cache"
    cut = S - T
    out("%s in %s, head %d: [%d queries, %d keys]; keys 0..%d %s | %d..%d block",
        att, name, h, T, S, cut - 1, ctx, cut, S - 1)
    out("        %s", "".join(("  | " if j == cut else "") + "%6s" % ("k@%d" % j) for j in range(S)))
    for t in range(T):
        out("  q@%-4d%s", cut + t, "".join(("  | " if j == cut else "") + "%6.3f" % w[t * S + j] for j in range(S)))


@dflash_command("pattn")
def pattn(args):
    """Print one head's attention weights, context | block marked.
Usage: pattn HEAD. At a stop in draft_layer, target_forward or attention
(or below them): rows = queries, columns = keys, with the boundary between
the context (or cached) keys and the block's keys marked."""
    _need(args, 1, "pattn HEAD")
    _need_stop("pattn")
    _pattn(_num(args[0], "pattn HEAD"))


@dflash_command("pblock")
def pblock(args):
    """Print the block as words, with its positions.
Usage: pblock. dflash_generate's block: anchor + masks before Step 5, the
proposals after."""
    _need(args, 0, "pblock")
    _need_stop("pblock")

    def show():
        B = _int("B")
        if _int("res->n_rounds") == 0:
            out("no block yet: the prefill is running (round 1's will be at positions %d..%d)",
                _int("n"), _int("n") + B - 1)
            return
        here = gdb.selected_frame().find_sal().line
        formed = marker_line("dflash_generate", "/* ---- Steps 2-5")
        if marker_line("dflash_generate", "/* ---- Step 3") <= here < formed:
            s0 = _int("start")
            blk = _ints(gdb.parse_and_eval("output_ids + start"), B)
            out("block: not copied yet (Step 3, dflash.c:%d); it will be output_ids[%d..%d]: %s (ids %s)",
                formed, s0, s0 + B - 1, words(blk), " ".join(map(str, blk)))
            return
        s0 = _int("ri->start_before")
        blk = _ints(gdb.parse_and_eval("block"), B)
        out("block [%d] at positions %d..%d: %s (ids %s)", B, s0, s0 + B - 1, words(blk),
            " ".join(map(str, blk)))
    _in_frame("dflash_generate", show)

end
