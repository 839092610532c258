/* explorer/figures.c - `dflash figures TRACE_DIR OUT_DIR [--round R] [--layer L]
 * [--head H] [--phase draft|prefill|verify] [--vocab FILE]`: the figures of
 * any traced run as standalone SVG files.
 *
 *   OUT_DIR/timeline.svg                              the whole run: prefill,
 *       then per round the draft's block and the target's posterior on one
 *       position axis, then the output
 *   OUT_DIR/attn_draft_round{r}_layer{l}_head{h}.svg  draft{r}.layers.{l}.self_attn.attn_weights[h]
 *   OUT_DIR/attn_verify_round{r}_layer{l}_head{h}.svg verify{r}.layers.{l}.self_attn.attn_weights[h]
 *   OUT_DIR/attn_prefill_layer{l}_head{h}.svg         prefill.layers.{l}.self_attn.attn_weights[h]
 *
 * The timeline is always drawn; a heatmap for every attention tensor of the
 * trace that the options select (each option narrows; none: all of them,
 * every head). Every caption is made from the trace alone (shapes,
 * positions, ids, and properties checked on the data: row sums, the weight
 * on later keys), so it is true for any trace this accepts. Tokens are
 * labelled with their words when --vocab names a vocab.txt or a
 * tokenizer.json (decoded as the program decodes it), else with their ids.
 *
 * The SVGs use only generic font families (sans-serif), plain shapes for the
 * marks, and fixed coordinates, so they render the same in any browser.
 *
 * Bounds: only the tensors drawn are read, each through the one .npy reader
 * (which checks the header against the file's real size before allocating);
 * a tensor over FIG_MAX_BYTES, a heatmap over FIG_MAX_CELLS or a run of more
 * than FIG_MAX_FILES figures is refused with a line saying so (nothing is
 * written first). Outputs: written to temporary names in OUT_DIR and
 * renamed into place only when every figure is written; on any error
 * nothing is left behind (exit 2).
 */
#include "explorer/figures.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dflash.h"
#include "formats/files.h"
#include "formats/load.h"
#include "formats/manifest.h"
#include "formats/tracenames.h"
#include "cli/flags.h"

#include <stddef.h>

#define FIG_MAX_BYTES ((size_t)256 << 20) /* one attention tensor's .npy file */
#define FIG_MAX_CELLS 262144              /* one heatmap: queries x keys */
#define FIG_MAX_ROUNDS 100000
#define FIG_MAX_FILES 4096                /* figures one run writes (a file per head) */
#define FONT "font-family=\"sans-serif\""

/* ===========================================================================
 * 1. The trace: its manifest (name -> file) and the tensors it draws.
 * ======================================================================== */

/* The trace: its manifest (formats/manifest.h, the one reader dflash diff and
 * dflash explore use too) and the directory it is in. */
typedef struct {
    Manifest m;
    const char *dir;
} Trace;

/* the file of a name, or NULL */
static const char *manifest_file(const Trace *t, const char *name) {
    int k = namemap_get(&t->m.index, name);
    return k >= 0 ? t->m.files.s[k] : NULL;
}

static int has(const Trace *m, const char *fmt, ...) {
    char name[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    return manifest_file(m, name) != NULL;
}

/* Read tensor `name` (which must be listed): 0, or -1 with dflash_errmsg. */
static int load(const Trace *m, NpyValues *a, const char *fmt, ...) {
    char name[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    memset(a, 0, sizeof *a);
    const char *file = manifest_file(m, name);
    if (!file) {
        dflash_set_error("%s: the trace has no tensor %s (a --trace-filter run?)", m->dir, name);
        return -1;
    }
    char *path = path_join(m->dir, file);
    if (!path) return -1;
    struct stat st;
    if (stat(path, &st) == 0 && (size_t)st.st_size > FIG_MAX_BYTES) {
        dflash_set_error("%s: %lld bytes, more than the %zu MiB dflash figures reads for one tensor", path,
                         (long long)st.st_size, FIG_MAX_BYTES >> 20);
        free(path);
        return -1;
    }
    /* the header against the manifest's dtype and shape (formats/manifest.c, as diff, explore, replay) */
    NpyArray h;
    int rc = npy_open(path, &h) == 0 && manifest_check_npy(&m->m, namemap_get(&m->m.index, name), path, &h) == 0 ? 0 : -1;
    if (rc == 0) rc = npy_read_values(path, a);
    free(path);
    return rc;
}

/* ids of a 1-D (or 0-d) int tensor */
static int load_ids(const Trace *m, NpyValues *a, const char *name) {
    if (load(m, a, "%s", name) != 0) return -1;
    if (!a->is_int || a->ndim > 1) {
        dflash_set_error("%s/%s: expected an int64 vector", m->dir, name);
        npy_values_free(a);
        return -1;
    }
    return 0;
}

/* ===========================================================================
 * 2. Token words: vocab.txt, tokenizer.json or none (ids), XML-escaped.
 * ======================================================================== */

static struct {
    int kind; /* 0 none, 1 vocab.txt, 2 tokenizer.json */
    Vocab v;
    ByteVocab b;
} VOC;

/* Append s (n bytes) to out (cap bytes) as XML text: & < > " escaped, valid
 * UTF-8 kept, every other byte (control, invalid UTF-8) as \xNN. */
static void xml_bytes(char *out, size_t cap, const char *s, size_t n) {
    size_t o = strlen(out);
    for (size_t i = 0; i < n && o + 8 < cap;) {
        unsigned char c = (unsigned char)s[i];
        const char *r = c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '"' ? "&quot;" : NULL;
        if (r) { o += (size_t)snprintf(out + o, cap - o, "%s", r); i++; continue; }
        if (c >= 0x20 && c < 0x7f) { out[o++] = (char)c; i++; continue; }
        int len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        int ok = len > 0 && i + (size_t)len <= n;
        for (int k = 1; ok && k < len; k++) ok = ((unsigned char)s[i + (size_t)k] & 0xc0) == 0x80;
        if (ok && len == 3) {
            unsigned char c1 = (unsigned char)s[i + 1];
            ok = !(c == 0xe0 && c1 < 0xa0) && !(c == 0xed && c1 >= 0xa0);
        }
        if (ok && len == 4) {
            unsigned char c1 = (unsigned char)s[i + 1];
            ok = !(c == 0xf0 && c1 < 0x90) && !(c == 0xf4 && c1 >= 0x90);
        }
        if (ok) {
            memcpy(out + o, s + i, (size_t)len);
            o += (size_t)len;
            i += (size_t)len;
        } else {
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
            i++;
        }
    }
    out[o] = 0;
}

/* The label of token id: its word (XML-escaped, at most ~40 bytes), or #id. */
static const char *tok(long id) {
    static char bufs[8][256];
    static int k;
    char *b = bufs[k++ % 8];
    b[0] = 0;
    if (VOC.kind == 1 && id >= 0 && id < VOC.v.n) {
        size_t n = strlen(VOC.v.words[id]);
        xml_bytes(b, 256, VOC.v.words[id], n > 40 ? 40 : n);
    } else if (VOC.kind == 2 && id >= 0 && id < VOC.b.n && VOC.b.words[id]) {
        xml_bytes(b, 256, VOC.b.words[id], VOC.b.lens[id] > 40 ? 40 : (size_t)VOC.b.lens[id]);
    } else {
        snprintf(b, 256, "#%ld", id);
    }
    return b;
}

/* ===========================================================================
 * 3. The run, read from the trace: prompt, rounds, output.
 * ======================================================================== */

typedef struct {
    int start, acc, B;
    int Lc;                  /* draft context rows (0: no draft tensors) */
    int64_t *block;          /* (B) verify{r}.input_ids: anchor + proposals */
    int64_t *block_in;       /* (B) draft{r}.block_output_ids, or NULL */
    int64_t *posterior;      /* (B) verify{r}.sampled */
} Round;

static struct {
    NpyValues in, out, first;   /* input_ids, output_ids, prefill.sampled */
    int n, n_out, R;
    Round *r;
    NpyValues *keep;            /* the arrays the rounds point into */
    int n_keep;
} RUN;

static void run_free(void) {
    npy_values_free(&RUN.in);
    npy_values_free(&RUN.out);
    npy_values_free(&RUN.first);
    for (int i = 0; i < RUN.n_keep; i++) npy_values_free(&RUN.keep[i]);
    free(RUN.keep);
    free(RUN.r);
    memset(&RUN, 0, sizeof RUN);
}

static int run_read(const Trace *m) {
    if (load_ids(m, &RUN.in, TN_INPUT_IDS) != 0 || load_ids(m, &RUN.out, TN_OUTPUT_IDS) != 0 ||
        load_ids(m, &RUN.first, "prefill." TN_SAMPLED) != 0)
        return -1;
    RUN.n = (int)RUN.in.n;
    RUN.n_out = (int)RUN.out.n;
    if (RUN.n < 1 || RUN.n_out < RUN.n) {
        dflash_set_error("%s: output_ids (%d) is shorter than input_ids (%d)", m->dir, RUN.n_out, RUN.n);
        return -1;
    }
    while (RUN.R < FIG_MAX_ROUNDS && has(m, "verify%d." TN_ACCEPTANCE, RUN.R + 1)) RUN.R++;
    RUN.r = calloc((size_t)RUN.R + 1, sizeof(Round));
    RUN.keep = calloc((size_t)RUN.R * 3 + 1, sizeof(NpyValues));
    if (!RUN.r || !RUN.keep) { dflash_set_error("out of memory"); return -1; }
    for (int ri = 0; ri < RUN.R; ri++) {
        Round *r = &RUN.r[ri];
        int rn = ri + 1;
        char nm[64];
        NpyValues acc, pos;
        NpyValues *blk = &RUN.keep[RUN.n_keep++], *post = &RUN.keep[RUN.n_keep++];
        snprintf(nm, sizeof nm, "verify%d." TN_ACCEPTANCE, rn);
        if (load_ids(m, &acc, nm) != 0) return -1;
        r->acc = acc.n == 1 ? (int)acc.i[0] : -1;
        npy_values_free(&acc);
        snprintf(nm, sizeof nm, "verify%d." TN_POSITION_IDS, rn);
        if (load_ids(m, &pos, nm) != 0) return -1;
        r->start = pos.n ? (int)pos.i[0] : -1;
        r->B = (int)pos.n;
        npy_values_free(&pos);
        snprintf(nm, sizeof nm, "verify%d." TN_INPUT_IDS, rn);
        if (load_ids(m, blk, nm) != 0) return -1;
        snprintf(nm, sizeof nm, "verify%d." TN_SAMPLED, rn);
        if (load_ids(m, post, nm) != 0) return -1;
        if (r->B < 1 || (int)blk->n != r->B || (int)post->n != r->B || r->acc < 0 || r->acc >= r->B ||
            r->start < RUN.n || r->start > RUN.n_out + 1) {
            dflash_set_error("%s: round %d's verify tensors disagree (block %d, acceptance %d, start %d)", m->dir,
                             rn, r->B, r->acc, r->start);
            return -1;
        }
        r->block = blk->i;
        r->posterior = post->i;
        if (has(m, "draft%d." TN_BLOCK_OUTPUT_IDS, rn) && has(m, "draft%d." TN_POSITION_IDS, rn)) {
            NpyValues *bi = &RUN.keep[RUN.n_keep++];
            snprintf(nm, sizeof nm, "draft%d." TN_BLOCK_OUTPUT_IDS, rn);
            if (load_ids(m, bi, nm) != 0) return -1;
            snprintf(nm, sizeof nm, "draft%d." TN_POSITION_IDS, rn);
            if (load_ids(m, &pos, nm) != 0) return -1;
            r->Lc = (int)pos.n - r->B;
            npy_values_free(&pos);
            if ((int)bi->n != r->B || r->Lc < 0) {
                dflash_set_error("%s: draft%d's block (%zu) or positions disagree with verify%d's (%d)", m->dir, rn,
                                 bi->n, rn, r->B);
                return -1;
            }
            r->block_in = bi->i;
        }
    }
    return 0;
}

/* the token at position p as the run committed it (output_ids), or -1 */
static long committed(int p) { return p >= 0 && p < RUN.n_out ? (long)RUN.out.i[p] : -1; }

/* ===========================================================================
 * 4. Output files: OutFiles (formats/files.h), each closed when drawn and all
 *    renamed into place at the end (all or nothing; a signal removes them).
 * ======================================================================== */

static struct {
    OutFile **o;
    int n, cap;
} OUTS;

static FILE *out_begin(const char *dir, const char *name) {
    if (OUTS.n == OUTS.cap) {
        int cap = OUTS.cap ? 2 * OUTS.cap : 64;
        OutFile **no = realloc(OUTS.o, sizeof(OutFile *) * (size_t)cap);
        if (!no) { dflash_set_error("out of memory"); return NULL; }
        OUTS.o = no;
        OUTS.cap = cap;
    }
    char *path = path_join(dir, name);
    if (!path) return NULL;
    OutFile *o = out_open(path, "OUT_DIR");
    free(path);
    if (!o) return NULL;
    OUTS.o[OUTS.n++] = o;
    return out_stream(o);
}

/* the figure just begun is written: closed (its temporary file stays until outs_finish) */
static int out_end(void) { return out_finish(OUTS.o[OUTS.n - 1]); }

/* ok: every figure renamed into place; else (or when a rename fails) the rest removed */
static int outs_finish(int ok) {
    for (int i = 0; i < OUTS.n; i++) {
        if (ok && out_commit(OUTS.o[i]) != 0) ok = 0;
        else if (!ok) out_abort(OUTS.o[i]);
    }
    free(OUTS.o);
    memset(&OUTS, 0, sizeof OUTS);
    return ok ? 0 : -1;
}

/* ===========================================================================
 * 5. The timeline.
 * ======================================================================== */

#define C_PROMPT "#d9d9d9"
#define C_ANCHOR "#fff7bc"
#define C_OK "#c7e9c0"
#define C_NO "#fcbba1"
#define C_BONUS "#fdae6b"
#define C_UNUSED "#ffffff"
#define C_NONFINITE "#d7301f"   /* a NaN or infinite attention weight */

/* one token cell; mark: 0 none, 1 a check mark, 2 a cross (drawn, no glyphs) */
static void cell(FILE *f, int x, int y, int w, int h, const char *fill, const char *stroke, int dashed,
                 const char *text, const char *tcol, int mark) {
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" rx=\"4\" fill=\"%s\" stroke=\"%s\" "
               "stroke-width=\"1.5\"%s/>\n", x + 2, y, w - 4, h, fill, stroke,
            dashed ? " stroke-dasharray=\"4 3\"" : "");
    fprintf(f, "<text x=\"%d\" y=\"%d\" %s font-size=\"13\" text-anchor=\"middle\" fill=\"%s\">%s</text>\n",
            x + w / 2, y + h / 2 + 5, FONT, tcol, text);
    int mx = x + w - 12, my = y + 4;
    if (mark == 1)
        fprintf(f, "<polyline points=\"%d,%d %d,%d %d,%d\" fill=\"none\" stroke=\"#238b45\" stroke-width=\"1.6\"/>\n",
                mx, my + 4, mx + 3, my + 7, mx + 8, my);
    else if (mark == 2)
        fprintf(f, "<path d=\"M%d %dL%d %dM%d %dL%d %d\" stroke=\"#cb181d\" stroke-width=\"1.6\"/>\n", mx, my,
                mx + 7, my + 7, mx + 7, my, mx, my + 7);
}

static void timeline(FILE *f) {
    int R = RUN.R, maxpos = RUN.n_out;
    for (int ri = 0; ri < R; ri++)
        if (RUN.r[ri].start + RUN.r[ri].B > maxpos) maxpos = RUN.r[ri].start + RUN.r[ri].B;
    int lw = 190, cw = 64, ch = 30, gap = 8, aw = 330, P = maxpos + 1;
    int W = lw + P * cw + aw, x0 = lw, y = 64;
    int Hh = y + (2 + 2 * R) * (ch + gap) + 18 + 2 * 26 + 10 + 24;
    int new_tokens = RUN.n_out - RUN.n, tot = 0, n_cut = 0;
    for (int ri = 0; ri < R; ri++) tot += RUN.r[ri].acc + 1;
    /* kept tokens (accepted proposals, the bonus) at positions the output
     * does not reach: a stop id or --max-new-tokens cut them; tau counts them */
    for (int ri = 0; ri < R; ri++)
        for (int i = 1; i <= RUN.r[ri].acc + 1; i++) n_cut += RUN.r[ri].start + i >= RUN.n_out;
    if (n_cut) Hh += 20;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n",
            W, Hh, W, Hh);
    fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", W, Hh);
    fprintf(f, "<text x=\"12\" y=\"24\" %s font-size=\"16\" font-weight=\"bold\" fill=\"#222222\">prompt \"", FONT);
    for (int i = 0; i < RUN.n && i < 24; i++) fprintf(f, "%s%s", i ? " " : "", tok(RUN.in.i[i]));
    fprintf(f, "%s\" (%d tokens)", RUN.n > 24 ? " ..." : "", RUN.n);
    if (R) fprintf(f, ", block size %d, %d round%s", RUN.r[0].B, R, R == 1 ? "" : "s");
    fprintf(f, "</text>\n");
    fprintf(f, "<text x=\"%d\" y=\"52\" %s font-size=\"12\" text-anchor=\"end\" fill=\"#555555\">position</text>\n",
            x0 - 10, FONT);
    for (int p = 0; p < P; p++)
        fprintf(f, "<text x=\"%d\" y=\"52\" %s font-size=\"12\" text-anchor=\"middle\" fill=\"#555555\">%d</text>\n",
                x0 + p * cw + cw / 2, FONT, p);
    /* prefill */
    fprintf(f, "<text x=\"%d\" y=\"%d\" %s font-size=\"13\" text-anchor=\"end\" fill=\"#222222\">prefill</text>\n",
            x0 - 10, y + ch / 2 + 5, FONT);
    for (int p = 0; p < RUN.n; p++)
        cell(f, x0 + p * cw, y, cw, ch, C_PROMPT, "#969696", 0, tok(RUN.in.i[p]), "#222222", 0);
    if (RUN.first.n)
        cell(f, x0 + RUN.n * cw, y, cw, ch, C_BONUS, "#d94801", 0, tok(RUN.first.i[0]), "#222222", 0);
    fprintf(f, "<text x=\"%d\" y=\"%d\" %s font-size=\"12\" fill=\"#222222\">target forward 1: %d prompt token%s"
               "</text>\n", x0 + P * cw + 12, y + ch / 2 + 5, FONT, RUN.n, RUN.n == 1 ? "" : "s");
    y += ch + gap;
    for (int ri = 0; ri < R; ri++) {
        const Round *r = &RUN.r[ri];
        fprintf(f, "<line x1=\"8\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#dddddd\" stroke-width=\"1\"/>\n",
                y - gap / 2, W - 8, y - gap / 2);
        fprintf(f, "<text x=\"%d\" y=\"%d\" %s font-size=\"13\" text-anchor=\"end\" fill=\"#222222\">"
                   "round %d: draft proposes</text>\n", x0 - 10, y + ch / 2 + 5, FONT, ri + 1);
        cell(f, x0 + r->start * cw, y, cw, ch, C_ANCHOR, "#b8a000", 0, tok(r->block[0]), "#222222", 0);
        for (int i = 1; i < r->B; i++) {
            int ok = i <= r->acc, cut = ok && r->start + i >= RUN.n_out;
            cell(f, x0 + (r->start + i) * cw, y, cw, ch, ok ? C_OK : C_NO, ok ? "#41ab5d" : "#cb181d", cut,
                 tok(r->block[i]), "#222222", ok ? 1 : 2);
        }
        if (r->block_in)
            fprintf(f, "<text x=\"%d\" y=\"%d\" %s font-size=\"12\" fill=\"#222222\">draft forward %d: "
                       "%d context rows + %d block rows</text>\n", x0 + P * cw + 12, y + ch / 2 + 5, FONT, ri + 1,
                    r->Lc, r->B);
        y += ch + gap;
        fprintf(f, "<text x=\"%d\" y=\"%d\" %s font-size=\"13\" text-anchor=\"end\" fill=\"#222222\">"
                   "target verifies</text>\n", x0 - 10, y + ch / 2 + 5, FONT);
        for (int i = 0; i < r->B; i++) {
            int p = r->start + i + 1;
            int cut = p >= RUN.n_out;  /* kept, but not in the output */
            if (i < r->acc) cell(f, x0 + p * cw, y, cw, ch, C_OK, "#41ab5d", cut, tok(r->posterior[i]), "#222222", 0);
            else if (i == r->acc)
                cell(f, x0 + p * cw, y, cw, ch, C_BONUS, "#d94801", cut, tok(r->posterior[i]), "#222222", 0);
            else cell(f, x0 + p * cw, y, cw, ch, C_UNUSED, "#bdbdbd", 1, tok(r->posterior[i]), "#969696", 0);
        }
        fprintf(f, "<text x=\"%d\" y=\"%d\" %s font-size=\"12\" fill=\"#222222\">target forward %d: "
                   "accepted %d + bonus, next start %d</text>\n", x0 + P * cw + 12, y + ch / 2 + 5, FONT, ri + 2,
                r->acc, r->start + r->acc + 1);
        y += ch + gap;
    }
    fprintf(f, "<line x1=\"8\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#dddddd\" stroke-width=\"1\"/>\n",
            y - gap / 2, W - 8, y - gap / 2);
    fprintf(f, "<text x=\"%d\" y=\"%d\" %s font-size=\"13\" font-weight=\"bold\" text-anchor=\"end\" "
               "fill=\"#222222\">output</text>\n", x0 - 10, y + ch / 2 + 5, FONT);
    for (int p = 0; p < RUN.n_out; p++) {
        const char *fill = C_PROMPT, *stroke = "#969696";
        if (p == RUN.n) { fill = C_BONUS; stroke = "#d94801"; }
        for (int ri = 0; ri < R; ri++) {
            const Round *r = &RUN.r[ri];
            if (p > r->start && p <= r->start + r->acc) { fill = C_OK; stroke = "#41ab5d"; }
            if (p == r->start + r->acc + 1) { fill = C_BONUS; stroke = "#d94801"; }
        }
        cell(f, x0 + p * cw, y, cw, ch, fill, stroke, 0, tok(committed(p)), "#222222", 0);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" %s font-size=\"12\" fill=\"#222222\">%d new token%s, %d target forwards",
            x0 + P * cw + 12, y + ch / 2 + 5, FONT, new_tokens, new_tokens == 1 ? "" : "s", R + 1);
    if (R) fprintf(f, "; tau %.2f", (double)tot / R);
    fprintf(f, "</text>\n");
    y += ch + gap + 18;
    static const struct { const char *fill, *stroke, *text; } leg[] = {
        {C_PROMPT, "#969696", "prompt"},
        {C_ANCHOR, "#b8a000", "anchor (block[0], known)"},
        {C_OK, "#41ab5d", "proposal accepted (= target's token)"},
        {C_NO, "#cb181d", "proposal rejected"},
        {C_BONUS, "#d94801", "target's own token (bonus)"},
        {C_UNUSED, "#bdbdbd", "posterior after a mismatch: unused"},
    };
    for (int k = 0; k < 6; k++) {
        int lx = 12 + (k % 3) * 300, ly = y + (k / 3) * 26;
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"28\" height=\"18\" rx=\"3\" fill=\"%s\" stroke=\"%s\" "
                   "stroke-width=\"1.5\"%s/>\n", lx, ly, leg[k].fill, leg[k].stroke,
                k == 5 ? " stroke-dasharray=\"4 3\"" : "");
        fprintf(f, "<text x=\"%d\" y=\"%d\" %s font-size=\"12\" fill=\"#222222\">%s</text>\n", lx + 36, ly + 14,
                FONT, leg[k].text);
    }
    y += 2 * 26 + 10;
    fprintf(f, "<text x=\"12\" y=\"%d\" %s font-size=\"12\" fill=\"#555555\">The target's posterior at position p "
               "is its next token after the block's tokens up to p - 1; tau = tokens per round (accepted + bonus)."
               "</text>\n", y, FONT);
    if (n_cut)
        fprintf(f, "<text x=\"12\" y=\"%d\" %s font-size=\"12\" fill=\"#555555\">Dashed green or orange: %d kept "
                   "token%s past the output's %d (cut by a stop id or --max-new-tokens); tau counts %s.</text>\n",
                y + 20, FONT, n_cut, n_cut == 1 ? "" : "s", RUN.n_out, n_cut == 1 ? "it" : "them");
    fprintf(f, "</svg>\n");
}

/* ===========================================================================
 * 6. Attention heatmaps.
 * ======================================================================== */

/* "Blues": white (0) to dark blue (1), piecewise linear */
static void blues(double v, char *out) {
    static const int stop[5][3] = {{247, 251, 255}, {198, 219, 239}, {107, 174, 214}, {33, 113, 181}, {8, 48, 107}};
    if (!(v >= 0)) v = 0;
    if (v > 1) v = 1;
    double x = v * 4;
    int s = (int)x;
    if (s > 3) s = 3;
    double fr = x - s;
    int c[3];
    for (int k = 0; k < 3; k++) c[k] = (int)(stop[s][k] + (stop[s + 1][k] - stop[s][k]) * fr + 0.5);
    snprintf(out, 8, "#%02x%02x%02x", c[0], c[1], c[2]);
}

typedef enum { PH_PREFILL, PH_DRAFT, PH_VERIFY } Phase;
static const char *PHASE_NAME[] = {"prefill", "draft", "verify"};

/* What one attention tensor's axes are: query and key positions and tokens
 * (-1: unknown), and where the block's keys start (draft / verify). */
typedef struct {
    int T, S;               /* queries, keys */
    int *qpos, *kpos;       /* (T), (S): positions, or -1 */
    long *qtok, *ktok;      /* (T), (S): tokens, or -1 */
    int block0;             /* first key of the block (S - B), or -1 */
} Axes;

static void axes_free(Axes *a) {
    free(a->qpos);
    free(a->kpos);
    free(a->qtok);
    free(a->ktok);
}

static int axes_make(const Trace *m, Phase ph, int rn, int T, int S, Axes *a) {
    memset(a, 0, sizeof *a);
    a->T = T;
    a->S = S;
    a->block0 = -1;
    a->qpos = malloc(sizeof(int) * (size_t)T + 1);
    a->kpos = malloc(sizeof(int) * (size_t)S + 1);
    a->qtok = malloc(sizeof(long) * (size_t)T + 1);
    a->ktok = malloc(sizeof(long) * (size_t)S + 1);
    if (!a->qpos || !a->kpos || !a->qtok || !a->ktok) { dflash_set_error("out of memory"); return -1; }
    for (int j = 0; j < S; j++) { a->kpos[j] = -1; a->ktok[j] = -1; }
    for (int t = 0; t < T; t++) { a->qpos[t] = -1; a->qtok[t] = -1; }
    /* the positions of the new rows (the last ones of the keys); keys before
     * them are cached rows at positions 0.. when the first new position says so */
    NpyValues pos;
    char nm[64];
    if (ph == PH_PREFILL) snprintf(nm, sizeof nm, "prefill." TN_POSITION_IDS);
    else snprintf(nm, sizeof nm, "%s%d." TN_POSITION_IDS, PHASE_NAME[ph], rn);
    int have_pos = has(m, "%s", nm);
    if (have_pos && load_ids(m, &pos, nm) != 0) return -1;
    int np = have_pos ? (int)pos.n : 0;
    if (have_pos && np <= S && np >= T && (np == 0 || pos.i[0] == S - np)) {
        for (int j = 0; j < S; j++) a->kpos[j] = j < S - np ? j : (int)pos.i[j - (S - np)];
        for (int t = 0; t < T; t++) a->qpos[t] = (int)pos.i[np - T + t];
    }
    if (have_pos) npy_values_free(&pos);
    /* tokens: committed positions from output_ids, the block from the round */
    const Round *r = ph != PH_PREFILL && rn >= 1 && rn <= RUN.R ? &RUN.r[rn - 1] : NULL;
    const int64_t *blk = r ? (ph == PH_DRAFT ? r->block_in : r->block) : NULL;
    int B = r ? r->B : 0;
    if (blk && T == B && S >= B) a->block0 = S - B;
    for (int j = 0; j < S; j++) {
        if (a->block0 >= 0 && j >= a->block0) a->ktok[j] = (long)blk[j - a->block0];
        else if (ph == PH_PREFILL && j < RUN.n) a->ktok[j] = (long)RUN.in.i[j];
        else if (a->kpos[j] >= 0 && (!r || a->kpos[j] < r->start)) a->ktok[j] = committed(a->kpos[j]);
    }
    for (int t = 0; t < T; t++) {
        if (blk && T == B) a->qtok[t] = (long)blk[t];
        else if (ph == PH_PREFILL && t < RUN.n) a->qtok[t] = (long)RUN.in.i[t];
    }
    return 0;
}

/* One head of a [H, T, S] attention tensor. */
static void heatmap(FILE *f, const NpyValues *A, int h, Phase ph, int rn, int layer, const Axes *ax, int *nonfinite) {
    int T = ax->T, S = ax->S;
    /* verify: the block's proposals the target rejected (block[i], i > acc),
     * as rows (T == B) and as the block's keys; -1: none marked */
    const Round *vr = ph == PH_VERIFY && rn >= 1 && rn <= RUN.R && ax->block0 >= 0 ? &RUN.r[rn - 1] : NULL;
    int rej0 = vr && vr->acc + 1 < vr->B ? vr->acc + 1 : -1;
    const double *w = A->f + (size_t)h * (size_t)T * (size_t)S;
    int cw = S <= 12 ? 76 : S <= 24 ? 48 : S <= 64 ? 22 : 10, ch = T <= 16 ? 40 : T <= 64 ? 20 : 10;
    int labels = cw >= 48, values = cw >= 48 && ch >= 20;
    int x0 = 150, y0 = 110;
    int W = x0 + S * cw + 24;
    if (W < 760) W = 760;
    int Hh = y0 + T * ch + 86 + (rej0 >= 0 ? 20 : 0);
    /* data-made facts for the caption */
    double max_sum_err = 0, later = 0;
    int known = 1, n_nan = 0, n_inf = 0;   /* non-finite weights: marked cells, counted in the caption */
    for (int t = 0; t < T; t++) {
        double s = 0;
        for (int j = 0; j < S; j++) {
            double v = w[(size_t)t * S + j];
            n_nan += isnan(v) != 0;
            n_inf += isinf(v) != 0;
            s += v;
            if (ax->qpos[t] < 0 || ax->kpos[j] < 0) known = 0;
            else if (ax->kpos[j] > ax->qpos[t] && v > later) later = v;
        }
        if (fabs(s - 1) > max_sum_err) max_sum_err = fabs(s - 1);
    }
    if (n_nan || n_inf) Hh += 20;   /* the caption's line for them */
    *nonfinite = n_nan + n_inf;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n",
            W, Hh, W, Hh);
    fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", W, Hh);
    if (ph == PH_PREFILL)
        fprintf(f, "<text x=\"12\" y=\"24\" %s font-size=\"16\" font-weight=\"bold\" fill=\"#222222\">"
                   "prefill (target), layer %d, head %d</text>\n", FONT, layer, h);
    else
        fprintf(f, "<text x=\"12\" y=\"24\" %s font-size=\"16\" font-weight=\"bold\" fill=\"#222222\">"
                   "%s round %d, layer %d, head %d</text>\n", FONT, ph == PH_DRAFT ? "draft" : "verify (target)", rn,
                layer, h);
    char tname[64];
    if (ph == PH_PREFILL) snprintf(tname, sizeof tname, "prefill");
    else snprintf(tname, sizeof tname, "%s%d", PHASE_NAME[ph], rn);
    fprintf(f, "<text x=\"12\" y=\"44\" %s font-size=\"12\" fill=\"#555555\">%s.layers.%d." TN_ATTN_WEIGHTS "[%d]"
               ": %d queries x %d keys</text>\n", FONT, tname, layer, h, T, S);
    if (ax->block0 >= 0) {
        int xb = x0 + ax->block0 * cw;
        if (ax->block0 > 0) {
            fprintf(f, "<text x=\"%d\" y=\"62\" %s font-size=\"13\" text-anchor=\"middle\" fill=\"#8c2d04\">%s</text>\n",
                    x0 + ax->block0 * cw / 2, FONT, ph == PH_DRAFT ? "context" : "cache");
            fprintf(f, "<line x1=\"%d\" y1=\"66\" x2=\"%d\" y2=\"66\" stroke=\"#8c2d04\" stroke-width=\"1.5\"/>\n",
                    x0 + 2, xb - 3);
        }
        fprintf(f, "<text x=\"%d\" y=\"62\" %s font-size=\"13\" text-anchor=\"middle\" fill=\"#08519c\">block</text>\n",
                xb + (S - ax->block0) * cw / 2, FONT);
        fprintf(f, "<line x1=\"%d\" y1=\"66\" x2=\"%d\" y2=\"66\" stroke=\"#08519c\" stroke-width=\"1.5\"/>\n",
                xb + 3, x0 + S * cw - 2);
    }
    for (int j = 0; j < S; j++) {
        if (!labels && j % 8 != 0 && j != S - 1) continue;
        int cx = x0 + j * cw + cw / 2;
        if (ax->kpos[j] >= 0)
            fprintf(f, "<text x=\"%d\" y=\"84\" %s font-size=\"12\" text-anchor=\"middle\" fill=\"#222222\">k@%d</text>\n",
                    cx, FONT, ax->kpos[j]);
        else
            fprintf(f, "<text x=\"%d\" y=\"84\" %s font-size=\"12\" text-anchor=\"middle\" fill=\"#222222\">k%d</text>\n",
                    cx, FONT, j);
        int rej = rej0 >= 0 && j - ax->block0 >= rej0;
        if (labels && ax->ktok[j] >= 0)
            fprintf(f, "<text x=\"%d\" y=\"100\" %s font-size=\"11\" text-anchor=\"middle\" fill=\"%s\"%s>%s</text>\n",
                    cx, FONT, rej ? "#cb181d" : "#555555", rej ? " text-decoration=\"line-through\"" : "", tok(ax->ktok[j]));
        if (rej)  /* a rejected proposal's key: a red bar above its column */
            fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"3\" fill=\"#cb181d\"/>\n", x0 + j * cw + 1,
                    y0 - 5, cw - 2);
    }
    for (int t = 0; t < T; t++) {
        int cy = y0 + t * ch + ch / 2 + 5;
        if (ch >= 20 || t % 8 == 0) {
            fprintf(f, "<text x=\"%d\" y=\"%d\" %s font-size=\"12\" text-anchor=\"end\" fill=\"#222222\">", x0 - 8, cy,
                    FONT);
            if (ax->qpos[t] >= 0) fprintf(f, "q@%d", ax->qpos[t]);
            else fprintf(f, "q%d", t);
            int rej = rej0 >= 0 && T == vr->B && t >= rej0;
            if (ax->qtok[t] >= 0)
                fprintf(f, " <tspan fill=\"%s\"%s>%s</tspan>", rej ? "#cb181d" : "#555555",
                        rej ? " text-decoration=\"line-through\"" : "", tok(ax->qtok[t]));
            fprintf(f, "</text>\n");
        }
        if (rej0 >= 0 && T == vr->B && t >= rej0)  /* a rejected proposal's row: a red bar left of it */
            fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"3\" height=\"%d\" fill=\"#cb181d\"/>\n", x0 - 5, y0 + t * ch + 1,
                    ch - 2);
        for (int j = 0; j < S; j++) {
            double v = w[(size_t)t * S + j];
            if (!isfinite(v)) {   /* NaN or inf: a red cell with a cross, never a colour of the scale */
                int xa = x0 + j * cw, ya = y0 + t * ch;
                fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" stroke=\"#ffffff\" "
                           "stroke-width=\"1\"><title>%s</title></rect>\n", xa, ya, cw, ch, C_NONFINITE,
                        isnan(v) ? "NaN" : v > 0 ? "inf" : "-inf");
                fprintf(f, "<path d=\"M%d,%d L%d,%d M%d,%d L%d,%d\" stroke=\"#ffffff\" stroke-width=\"1.5\"/>\n", xa + 2,
                        ya + 2, xa + cw - 2, ya + ch - 2, xa + cw - 2, ya + 2, xa + 2, ya + ch - 2);
                continue;
            }
            char col[8];
            blues(v, col);
            fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" stroke=\"#ffffff\" "
                       "stroke-width=\"1\"><title>%.6g</title></rect>\n", x0 + j * cw, y0 + t * ch, cw, ch, col, v);
            if (values)
                fprintf(f, "<text x=\"%d\" y=\"%d\" %s font-size=\"12\" text-anchor=\"middle\" fill=\"%s\">%.4f</text>\n",
                        x0 + j * cw + cw / 2, cy, FONT, v > 0.5 ? "#ffffff" : "#222222", fabs(v) < 5e-5 ? 0.0 : v);
        }
    }
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#444444\" stroke-width=\"1\"/>\n",
            x0, y0, S * cw, T * ch);
    if (ax->block0 > 0)
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#111111\" stroke-width=\"3\"/>\n",
                x0 + ax->block0 * cw, 70, x0 + ax->block0 * cw, y0 + T * ch + 6);
    /* captions: each a property of these numbers */
    int yc = y0 + T * ch + 24;
    fprintf(f, "<text x=\"12\" y=\"%d\" %s font-size=\"12\" fill=\"#555555\">rows: queries", yc, FONT);
    if (ax->qpos[0] >= 0) fprintf(f, " at positions %d..%d", ax->qpos[0], ax->qpos[T - 1]);
    fprintf(f, "; columns: keys");
    if (ax->kpos[0] >= 0) fprintf(f, " at positions %d..%d", ax->kpos[0], ax->kpos[S - 1]);
    if (ax->block0 > 0) fprintf(f, " (the last %d are the block's)", S - ax->block0);
    fprintf(f, "; each row sums to 1 (largest deviation %.2e)</text>\n", max_sum_err);
    yc += 20;
    if (known)
        fprintf(f, "<text x=\"12\" y=\"%d\" %s font-size=\"12\" fill=\"#555555\">%s</text>\n", yc, FONT,
                later == 0 ? "no weight on a key after its query's position (causal in these numbers)"
                           : "weight on keys after the query's position too (not causal in these numbers)");
    yc += 20;
    fprintf(f, "<text x=\"12\" y=\"%d\" %s font-size=\"12\" fill=\"#555555\">colour: weight, white 0 to dark blue 1"
               "%s</text>\n", yc, FONT, values ? "; numbers: the weight to 4 decimals" : "; hover a cell for its value");
    if (rej0 >= 0) {
        yc += 20;
        fprintf(f, "<text x=\"12\" y=\"%d\" %s font-size=\"12\" fill=\"#cb181d\">red, struck through: the %d "
                   "proposal%s the target rejected (block[%d..%d]; acceptance length %d)</text>\n", yc, FONT,
                vr->B - rej0, vr->B - rej0 == 1 ? "" : "s", rej0, vr->B - 1, vr->acc);
    }
    if (n_nan || n_inf) {
        yc += 20;
        fprintf(f, "<text x=\"12\" y=\"%d\" %s font-size=\"12\" fill=\"%s\">not finite: %d NaN and %d infinite weight%s, "
                   "the red crossed cells</text>\n", yc, FONT, C_NONFINITE, n_nan, n_inf, n_nan + n_inf == 1 ? "" : "s");
    }
    fprintf(f, "</svg>\n");
}

/* ===========================================================================
 * 7. The subcommand.
 * ======================================================================== */

typedef struct {
    int round, layer, head, phase; /* -1: any */
    const char *vocab;
} Select;

static int draw_tensor(const Trace *m, const char *out_dir, Phase ph, int rn, int layer, const Select *sel,
                       int *n_drawn) {
    NpyValues A;
    if (ph == PH_PREFILL) {
        if (load(m, &A, "prefill.layers.%d." TN_ATTN_WEIGHTS, layer) != 0) return -1;
    } else if (load(m, &A, "%s%d.layers.%d." TN_ATTN_WEIGHTS, PHASE_NAME[ph], rn, layer) != 0) {
        return -1;
    }
    int rc = -1;
    Axes ax;
    memset(&ax, 0, sizeof ax);
    if (A.is_int || A.ndim != 3 || A.shape[0] < 1 || A.shape[1] < 1 || A.shape[2] < 1) {
        dflash_set_error("%s: an attention tensor of layer %d is not a non-empty [H, T, S] float array", m->dir,
                         layer);
        goto out;
    }
    int H = (int)A.shape[0], T = (int)A.shape[1], S = (int)A.shape[2];
    if ((double)T * S > FIG_MAX_CELLS) {
        dflash_set_error("%s: layer %d's attention is %d x %d per head, more than the %d cells one heatmap draws",
                         m->dir, layer, T, S, FIG_MAX_CELLS);
        goto out;
    }
    if (*n_drawn + (sel->head >= 0 ? 1 : (double)H) > FIG_MAX_FILES) {
        dflash_set_error("%s: layer %d's attention has %d heads: more than the %d figures one run writes "
                         "(choose with --phase, --round, --layer, --head)", m->dir, layer, H, FIG_MAX_FILES);
        goto out;
    }
    if (axes_make(m, ph, rn, T, S, &ax) != 0) goto out;
    for (int h = 0; h < H; h++) {
        if (sel->head >= 0 && h != sel->head) continue;
        char name[128];
        if (ph == PH_PREFILL) snprintf(name, sizeof name, "attn_prefill_layer%d_head%d.svg", layer, h);
        else snprintf(name, sizeof name, "attn_%s_round%d_layer%d_head%d.svg", PHASE_NAME[ph], rn, layer, h);
        FILE *f = out_begin(out_dir, name);
        if (!f) goto out;
        int bad = 0;
        heatmap(f, &A, h, ph, rn, layer, &ax, &bad);
        if (out_end() != 0) goto out;
        (*n_drawn)++;
        if (bad)   /* the figure marks them; the terminal says so too */
            fprintf(stderr, "dflash figures: %s/%s: %d attention weight%s not finite (NaN or infinite), drawn as red "
                            "crossed cells\n", out_dir, name, bad, bad == 1 ? " is" : "s are");
    }
    rc = 0;
out:
    axes_free(&ax);
    npy_values_free(&A);
    return rc;
}

/* What the run may write against what it reads, through formats/files.c's one
 * check (out_check_paths): OUT_DIR (a directory written into) may not be the
 * trace directory or inside it (a symbolic link to it included), and no
 * file already in OUT_DIR under a name this writes (timeline.svg,
 * attn_*.svg) may be an input (a symbolic or hard link to the trace's files
 * or the vocabulary): out_open follows a link and would replace its target.
 * 0, or -1 with dflash_errmsg. */
static int check_outputs(const char *out_dir, const char *dir, const char *vocab) {
    const char *inputs[2] = {dir, vocab};
    int n_out = 0, cap = 16, rc = -1;
    OutPath *outs = malloc(sizeof *outs * (size_t)cap);
    if (!outs) { dflash_set_error("out of memory"); return -1; }
    outs[n_out++] = (OutPath){out_dir, "the output directory", 2};
    DIR *d = opendir(out_dir);  /* missing: nothing in it yet */
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        const char *nm = e->d_name;
        size_t n = strlen(nm);
        if (strcmp(nm, "timeline.svg") != 0 && !(n > 9 && strncmp(nm, "attn_", 5) == 0 && strcmp(nm + n - 4, ".svg") == 0))
            continue;
        if (n_out == cap) {
            OutPath *no = realloc(outs, sizeof *outs * (size_t)(cap *= 2));
            if (!no) { dflash_set_error("out of memory"); goto out; }
            outs = no;
        }
        char *p = path_join(out_dir, nm);
        if (!p) goto out;
        outs[n_out++] = (OutPath){p, "the figure", 0};
    }
    rc = out_check_paths("OUT_DIR", outs, n_out, inputs, vocab ? 2 : 1);
out:
    if (d) closedir(d);
    for (int k = 1; k < n_out; k++) free((char *)outs[k].path);
    free(outs);
    return rc;
}

static int usage_error(const char *msg) {
    fprintf(stderr, "dflash figures: %s (usage: dflash figures TRACE_DIR OUT_DIR [--round R] [--layer L] "
                    "[--head H] [--phase draft|prefill|verify] [--vocab FILE])\n", msg);
    return 2;
}

/* THE flags of dflash figures (cli/flags.h; tests/test_flags.c checks them
 * against the usage line) */
typedef struct { long round, layer, head; int phase; const char *vocab; } FigArgs;
#define FA(m) offsetof(FigArgs, m)
const Flag FIGURES_FLAGS[] = {
    {.name = "--round", .kind = FLAG_INT, .field = FA(round), .lo = 0, .hi = 1000000},
    {.name = "--layer", .kind = FLAG_INT, .field = FA(layer), .lo = 0, .hi = 1000000},
    {.name = "--head", .kind = FLAG_INT, .field = FA(head), .lo = 0, .hi = 1000000},
    {.name = "--phase", .kind = FLAG_CHOICE, .field = FA(phase), .choices = "prefill|draft|verify"},  /* Phase's order */
    {.name = "--vocab", .kind = FLAG_STRING, .field = FA(vocab)},
    FLAG_TABLE_END};
#undef FA

int figures_main(int argc, char **argv) {
    const char *dir = NULL, *out_dir = NULL, *pos[2];
    FigArgs fa = {-1, -1, -1, -1, NULL};
    int n_pos = 0;
    int prc = flags_parse(FIGURES_FLAGS, argc, argv, &fa, "dflash figures", pos, 2, &n_pos);
    if (prc == 1) {
        printf("usage: dflash figures TRACE_DIR OUT_DIR [--round R] [--layer L] [--head H] "
               "[--phase draft|prefill|verify] [--vocab FILE]\n");
        return 0;
    }
    if (prc != 0) return usage_error(dflash_errmsg);
    if (n_pos > 0) dir = pos[0];
    if (n_pos > 1) out_dir = pos[1];
    Select sel = {(int)fa.round, (int)fa.layer, (int)fa.head, fa.phase, fa.vocab};
    if (!dir || !out_dir) return usage_error("expected TRACE_DIR and OUT_DIR");
    if (sel.round == 0) return usage_error("--round: rounds are numbered from 1");
    if (sel.round > 0 && sel.phase == PH_PREFILL) return usage_error("--round: the prefill has no round");
    char *od = strdup(out_dir);  /* without trailing slashes, for the names it prints */
    if (!od) return usage_error("out of memory");
    for (size_t n = strlen(od); n > 1 && od[n - 1] == '/'; n--) od[n - 1] = 0;
    out_dir = od;

    Trace m = {.dir = dir};
    int rc = 2, n_drawn = 0, made_dir = 0;
    int ml = manifest_load(&m.m, dir, 0);
    if (ml == 1) dflash_set_error("%s: no trace.jsonl: not a trace directory", dir);
    if (ml != 0) goto fail;
    if (sel.vocab) {
        size_t n = strlen(sel.vocab);
        if (n >= 5 && strcmp(sel.vocab + n - 5, ".json") == 0) {
            if (tokenizer_json_load(&VOC.b, sel.vocab) != 0) goto fail;
            VOC.kind = 2;
        } else {
            if (vocab_load(&VOC.v, sel.vocab) != 0) goto fail;
            VOC.kind = 1;
        }
    }
    /* the output directory: never an input, the trace directory or inside it */
    if (check_outputs(out_dir, dir, sel.vocab) != 0) goto fail;
    {
        struct stat so;
        if (stat(out_dir, &so) != 0) {
            made_dir = 1;
            if (mkdir(out_dir, 0777) != 0 || stat(out_dir, &so) != 0) {
                dflash_set_error("%s: cannot create the output directory (%s)", out_dir, strerror(errno));
                goto fail;
            }
        } else if (!S_ISDIR(so.st_mode)) {
            dflash_set_error("%s: not a directory", out_dir);
            goto fail;
        }
    }
    if (run_read(&m) != 0) goto fail;
    if (sel.round > RUN.R) {
        dflash_set_error("--round %d: the trace has %d round%s", sel.round, RUN.R, RUN.R == 1 ? "" : "s");
        goto fail;
    }
    {
        FILE *f = out_begin(out_dir, "timeline.svg");
        if (!f) goto fail;
        timeline(f);
        if (out_end() != 0) goto fail;
    }
    /* every attention tensor of the trace, in the manifest's order */
    int n_heat = 0, max_layer = -1, n_attn = 0;
    for (int k = 0; k < m.m.names.n; k++) {
        const char *nm = m.m.names.s[k];
        int rn = 0, l = -1, end = 0, ph = -1;
        if (sscanf(nm, "prefill.layers.%d." TN_ATTN_WEIGHTS "%n", &l, &end) == 1 && !nm[end]) ph = PH_PREFILL;
        else if (sscanf(nm, "draft%d.layers.%d." TN_ATTN_WEIGHTS "%n", &rn, &l, &end) == 2 && !nm[end]) ph = PH_DRAFT;
        else if (sscanf(nm, "verify%d.layers.%d." TN_ATTN_WEIGHTS "%n", &rn, &l, &end) == 2 && !nm[end]) ph = PH_VERIFY;
        if (ph < 0 || l < 0 || rn < 0 || rn > RUN.R) continue;
        n_attn++;
        if (l > max_layer) max_layer = l;
        if (sel.phase >= 0 && ph != sel.phase) continue;
        if (sel.round > 0 && (ph == PH_PREFILL || rn != sel.round)) continue;
        if (sel.layer >= 0 && l != sel.layer) continue;
        int before = n_drawn;
        if (draw_tensor(&m, out_dir, (Phase)ph, rn, l, &sel, &n_drawn) != 0) goto fail;
        n_heat += n_drawn - before;
    }
    if (n_heat == 0 && (sel.phase >= 0 || sel.round > 0 || sel.layer >= 0 || sel.head >= 0)) {
        dflash_set_error("%s: no attention weights match the selection (the trace has %d attention tensors, "
                         "%d round%s, layers up to %d)", dir, n_attn, RUN.R, RUN.R == 1 ? "" : "s", max_layer);
        goto fail;
    }
    if (outs_finish(1) != 0) goto fail_done;
    printf("dflash figures: wrote %s/timeline.svg and %d heatmap%s\n", out_dir, n_heat, n_heat == 1 ? "" : "s");
    rc = 0;
    goto done;
fail:
    outs_finish(0);
fail_done:
    if (made_dir) rmdir(out_dir);  /* made here, and empty again: nothing left behind */
    fprintf(stderr, "dflash figures: %s\n", dflash_errmsg);
done:
    run_free();
    manifest_free(&m.m);
    if (VOC.kind == 1) vocab_free(&VOC.v);
    if (VOC.kind == 2) byte_vocab_free(&VOC.b);
    VOC.kind = 0;
    free(od);
    return rc;
}
