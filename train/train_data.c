/* train/train_data.c - the data of `dflash train` (train/train_data.h):
 *   - the run's PRNG (data order, --generate's prompts, --bench's ids);
 *   - sequences of different lengths (Seqs): --data FILE (the line format
 *     below), --generate N (the target writes its own training text),
 *     --save-data (seq_write);
 *   - --batches FILE: train_oracle.py's case file (each step's sequences,
 *     masks, anchors and keep flags given);
 *   - one step's batch (Drawer): b sequences cut or padded to S, anchors
 *     drawn, the target's features kept across epochs.
 * Everything that can be refused is refused here with one line naming the
 * file and the place. */
#include "train/train_data.h"
#include "formats/files.h"
#include "formats/json.h"
#include "formats/load.h"

#include <stdlib.h>
#include <string.h>

/* ===========================================================================
 * 2. Data
 * ======================================================================== */

/* A draw below n for the data order, --generate's prompts and --bench's
 * ids, from train/train.h's one PRNG (train_rng_seed / train_rng_next: dflash.c's
 * sampling generator): the output's top 53 bits modulo n. */
int cli_rng_below(uint64_t *s, int n) { return (int)((train_rng_next(s) >> 11) % (uint64_t)n); }

void seqs_free(Seqs *s) {
    free(s->len);
    free(s->off);
    free(s->line);
    free(s->ids);
    free(s->mask);
    memset(s, 0, sizeof *s);
}

int seqs_push(Seqs *s, const int *ids, const int *mask, int len, int line) {
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        int *l = realloc(s->len, sizeof(int) * (size_t)cap), *ln = NULL;
        size_t *o = NULL;
        if (l) s->len = l;
        if (l && (o = realloc(s->off, sizeof(size_t) * (size_t)cap))) s->off = o;
        if (o && (ln = realloc(s->line, sizeof(int) * (size_t)cap))) s->line = ln;
        if (!ln) { dflash_set_error("out of memory (data: %d sequences)", cap); return -1; }
        s->cap = cap;
    }
    if (s->total + (size_t)len > s->cap_tokens) {
        size_t cap = s->cap_tokens ? 2 * s->cap_tokens : 4096;
        while (cap < s->total + (size_t)len) cap *= 2;
        int *i = realloc(s->ids, sizeof(int) * cap), *m = NULL;
        if (i) s->ids = i;
        if (i && (m = realloc(s->mask, sizeof(int) * cap))) s->mask = m;
        if (!m) { dflash_set_error("out of memory (data: %zu tokens)", cap); return -1; }
        s->cap_tokens = cap;
    }
    s->len[s->n] = len;
    s->off[s->n] = s->total;
    s->line[s->n] = line;
    memcpy(s->ids + s->total, ids, sizeof(int) * (size_t)len);
    memcpy(s->mask + s->total, mask, sizeof(int) * (size_t)len);
    s->total += (size_t)len;
    s->n++;
    return 0;
}

/* at most 40 bytes of p as text, control bytes, bytes >= 0x7f, '\\' and
 * '"' as \xNN (a NUL byte in a data line shows as \x00, not as the end) */
static void show_bytes(const char *p, size_t n, char *out, size_t size) {
    size_t w = 0;
    for (size_t i = 0; i < n && i < 40 && w + 5 < size; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c < 0x20 || c >= 0x7f || c == '\\' || c == '"') w += (size_t)snprintf(out + w, size - w, "\\x%02X", c);
        else out[w++] = (char)c;
    }
    out[w] = 0;
}

/* --data FILE. Each line: token ids (decimal, 0..V-1) separated by spaces
 * or tabs, and at most one "|": the ids before it are a prompt (loss mask 0),
 * the ids after it are trained on (1); a line without "|" is trained on
 * everywhere. Blank lines and lines whose first non-blank is # are skipped. */
int data_parse(Seqs *s, const char *path, const char *text, size_t len, int V) {
    int *ids = NULL, *mask = NULL, cap = 0, rc = -1;
    int line = 0;
    for (size_t pos = 0; pos < len;) {
        size_t end = pos;
        while (end < len && text[end] != '\n') end++;
        line++;
        int n = 0, bars = 0, mask_now = 1;
        /* a "|" anywhere in the line: ids before it are the prompt */
        for (size_t k = pos; k < end; k++) if (text[k] == '|') { mask_now = 0; break; }
        size_t p = pos;
        while (p < end && (text[p] == ' ' || text[p] == '\t' || text[p] == '\r')) p++;
        if (p < end && text[p] == '#') { pos = end + 1; continue; }
        while (p < end) {
            while (p < end && (text[p] == ' ' || text[p] == '\t' || text[p] == '\r')) p++;
            if (p >= end) break;
            size_t q = p;
            while (q < end && text[q] != ' ' && text[q] != '\t' && text[q] != '\r') q++;
            if (q - p == 1 && text[p] == '|') {
                if (++bars > 1) { dflash_set_error("%s:%d: a second \"|\": expected at most one per line", path, line); goto done; }
                mask_now = 1;
                p = q;
                continue;
            }
            long v = 0;
            int ok = q - p <= 10;
            for (size_t k = p; ok && k < q; k++) {
                if (text[k] < '0' || text[k] > '9') ok = 0;
                else v = 10 * v + (text[k] - '0');
            }
            if (!ok) {
                char shown[200];
                show_bytes(text + p, q - p, shown, sizeof shown);
                dflash_set_error("%s:%d: token %d: expected a token id (digits) or \"|\", got \"%s\"", path, line,
                                 n + 1, shown);
                goto done;
            }
            if (v >= V) {
                dflash_set_error("%s:%d: token %d: expected a token id in 0..%d (the target's vocab_size), got %ld",
                                 path, line, n + 1, V - 1, v);
                goto done;
            }
            if (n == cap) {
                cap = cap ? 2 * cap : 256;
                int *ni = realloc(ids, sizeof(int) * (size_t)cap), *nm = NULL;
                if (ni) ids = ni;
                if (ni && (nm = realloc(mask, sizeof(int) * (size_t)cap))) mask = nm;
                if (!nm) { dflash_set_error("out of memory (%s:%d)", path, line); goto done; }
            }
            ids[n] = (int)v;
            mask[n] = mask_now;
            n++;
            p = q;
        }
        if (n == 0 && bars) { dflash_set_error("%s:%d: expected token ids, got only \"|\"", path, line); goto done; }
        if (n > 0 && seqs_push(s, ids, mask, n, line) != 0) goto done;
        pos = end + 1;
    }
    if (s->n == 0) { dflash_set_error("%s: no sequences (every line is blank or a comment)", path); goto done; }
    rc = 0;
done:
    free(ids);
    free(mask);
    return rc;
}

/* Each sequence must hold a block and, cut to S, give a batch of its own at
 * least one anchor slot (train_anchor_count, train/train.c: SpecForge's
 * min(num_anchors, candidates - 1), the candidates being the positions
 * 0..S-B with loss mask 1), so no batch drawn from the data can lack one. */
int data_check(const Seqs *s, const char *what, int S, int B, int N) {
    for (int i = 0; i < s->n; i++) {
        char where[4200];
        if (s->line[i]) snprintf(where, sizeof where, "%.4000s:%d", what, s->line[i]);
        else snprintf(where, sizeof where, "%.4000s: sequence %d", what, i + 1);
        if (s->len[i] < B) {
            dflash_set_error("%s: %d ids: expected at least a block (block size %d)", where, s->len[i], B);
            return -1;
        }
        int n = s->len[i] < S ? s->len[i] : S;
        if (train_anchor_count(s->mask + s->off[i], 1, n, B, N) < 1) {
            dflash_set_error("%s: no valid anchor: expected at least 2 positions 0..%d (its first %d ids less a block) "
                             "with loss mask 1 (SpecForge's anchor count rule; docs/training.md)", where, n - B, n);
            return -1;
        }
    }
    return 0;
}

/* --generate N: the target continues N random prompts of P ids (uniform
 * over the vocabulary, mask_token_id excepted) up to S tokens at the given
 * temperature, stopping at its stop ids; loss mask 0 on the prompt, 1 on
 * the rest. A sequence that gives no anchor (the target stopped at once) is
 * drawn again, at most 10 N times in all; so is one whose prompt is the
 * start of a sequence of `exclude` (NULL: none; --heldout: the training
 * data). stream: the PRNG stream ("generate", "heldout"). */
static int prompt_excluded(const Seqs *ex, const int *prompt, int P) {
    for (int i = 0; ex && i < ex->n; i++)
        if (ex->len[i] >= P && memcmp(ex->ids + ex->off[i], prompt, sizeof(int) * (size_t)P) == 0) return 1;
    return 0;
}

int data_generate(Seqs *s, const Model *target, const char *target_dir, int N, int P, int S, int B,
                         int n_anchors, double temperature, int mask_id, uint64_t seed, uint64_t stream,
                         const Seqs *exclude, const char *what) {
    GenParams p = {0};
    char from[4200];
    if (stop_ids_default(target_dir, target, p.stop_ids, &p.n_stop, from, sizeof from) != 0) return -1;
    p.max_new_tokens = S - P;
    p.block_size = 1;
    p.temperature = temperature;
    int V = target->cfg.vocab_size;
    int *prompt = malloc(sizeof(int) * (size_t)P), *mask = malloc(sizeof(int) * (size_t)S);
    int rc = -1, tries = 0, dropped = 0;
    uint64_t rng = train_rng_seed(seed ^ stream);
    double t0 = now_seconds(), last = t0;
    if (!prompt || !mask) { dflash_set_error("out of memory"); goto done; }
    while (s->n < N) {
        if (++tries > 10 * N) {
            dflash_set_error("%s: %d of %d tries gave no anchor (the target stops right after the prompt) or a "
                             "training prompt; try a larger --prompt-len or --temperature", what, dropped, tries - 1);
            goto done;
        }
        for (int i = 0; i < P; i++) {
            do prompt[i] = cli_rng_below(&rng, V); while (prompt[i] == mask_id && V > 1);
        }
        p.seed = train_rng_next(&rng);
        if (prompt_excluded(exclude, prompt, P)) { dropped++; continue; }
        GenResult r;
        if (ar_generate(target, prompt, P, &p, &r) != 0) goto done;
        int n = r.n_output;
        for (int i = 0; i < n; i++) mask[i] = i >= P;
        int usable = n >= B && train_anchor_count(mask, 1, n, B, n_anchors) >= 1;
        int push = usable ? seqs_push(s, r.output_ids, mask, n, 0) : 0;
        gen_result_free(&r);
        if (push != 0) goto done;
        if (!usable) dropped++;
        double t = now_seconds();
        if (t - last > 2 || s->n == N) {
            fprintf(stderr, "%s: %d/%d sequences of up to %d ids (%.1f s)\n", what, s->n, N, S, t - t0);
            last = t;
        }
    }
    if (dropped) fprintf(stderr, "%s: %d sequences gave no anchor%s and were drawn again\n", what, dropped,
                         exclude ? " or began like a training sequence" : "");
    rc = 0;
done:
    free(prompt);
    free(mask);
    return rc;
}

/* --batches FILE: train_oracle.py's case file. Only its "batches" list is
 * read: each {"input_ids": b x S ids, "loss_mask": b x S 0/1 (optional, all
 * 1), "anchors": b x N positions 0..S-1 (the kept ones sorted), "keep": b x N
 * booleans (optional, all true)}. A batch dflash train traced (train{s}.*)
 * reads back as one. */


void case_free(Case *c) {
    for (int i = 0; i < c->n; i++) {
        free(c->batch[i].ids);
        free(c->batch[i].mask);
        free(c->batch[i].anchors);
        free(c->batch[i].keep);
    }
    free(c->batch);
    memset(c, 0, sizeof *c);
}

/* kind: 'i' ids 0..hi, 'm' 0 or 1, 'a' anchors 0..hi, 'k' true/false (or 0/1).
 * rows/cols: the expected shape (-1: any, then set). */
static int case_matrix(const Json *obj, const char *path, int bi, const char *key, char kind, int hi, int *rows,
                       int *cols, int **out) {
    const Json *m = json_get(obj, key);
    char got[96];
    if (!m) { dflash_set_error("%s: batches[%d]: no \"%s\"", path, bi, key); return -1; }
    if (m->type != JSON_ARRAY || m->n == 0 || (*rows >= 0 && m->n != *rows)) {
        dflash_set_error("%s: batches[%d].%s: expected a list of %s%d rows, got %s", path, bi, key,
                         *rows >= 0 ? "" : "at least ", *rows >= 0 ? *rows : 1, json_describe(m, got, sizeof got));
        return -1;
    }
    *rows = m->n;
    for (int r = 0; r < m->n; r++) {
        const Json *row = &m->items[r];
        if (row->type != JSON_ARRAY || row->n == 0 || (*cols >= 0 && row->n != *cols)) {
            dflash_set_error("%s: batches[%d].%s[%d]: expected a list of %s%d values, got %s", path, bi, key, r,
                             *cols >= 0 ? "" : "at least ", *cols >= 0 ? *cols : 1, json_describe(row, got, sizeof got));
            return -1;
        }
        *cols = row->n;
    }
    int *v = malloc(sizeof(int) * (size_t)*rows * (size_t)*cols);
    if (!v) { dflash_set_error("out of memory (%s)", path); return -1; }
    for (int r = 0; r < *rows; r++)
        for (int c = 0; c < *cols; c++) {
            const Json *x = &m->items[r].items[c];
            long long val = -1;
            if (kind == 'k' && x->type == JSON_BOOL) val = x->boolean;
            else if (x->type == JSON_NUMBER && x->is_integer) val = x->integer;
            else if (x->type == JSON_NUMBER && (x->number == 0.0 || x->number == 1.0)) val = (long long)x->number;
            int ok = kind == 'm' || kind == 'k' ? (val == 0 || val == 1) : (val >= 0 && val <= hi);
            if (!ok) {
                const char *want = kind == 'm' ? "0 or 1" : kind == 'k' ? "true or false" : NULL;
                if (want) dflash_set_error("%s: batches[%d].%s[%d][%d]: expected %s, got %s", path, bi, key, r, c, want,
                                           json_describe(x, got, sizeof got));
                else dflash_set_error("%s: batches[%d].%s[%d][%d]: expected an integer in 0..%d%s, got %s", path, bi,
                                      key, r, c, hi, kind == 'i' ? " (the target's vocab_size - 1)" : " (S - 1)",
                                      json_describe(x, got, sizeof got));
                free(v);
                return -1;
            }
            v[(size_t)r * (size_t)*cols + (size_t)c] = (int)val;
        }
    *out = v;
    return 0;
}

int case_load(Case *c, const char *path, int V) {
    char *text = NULL;
    size_t len = 0;
    memset(c, 0, sizeof *c);
    if (file_read_all(path, &text, &len) != 0) return -1;
    int rc = case_parse(c, path, text, len, V);
    free(text);
    return rc;
}

int case_parse(Case *c, const char *path, const char *text, size_t len, int V) {
    Json root;
    memset(c, 0, sizeof *c);
    if (json_parse(text, len, path, &root) != 0) return -1;
    int rc = -1;
    char got[96];
    const Json *bl = json_get(&root, "batches");
    if (!bl || bl->type != JSON_ARRAY || bl->n == 0) {
        dflash_set_error("%s: field \"batches\": expected a non-empty list (train_oracle.py's case format), got %s",
                         path, bl ? json_describe(bl, got, sizeof got) : "nothing");
        goto done;
    }
    c->batch = calloc((size_t)bl->n, sizeof(CaseBatch));
    if (!c->batch) { dflash_set_error("out of memory (%s)", path); goto done; }
    c->n = bl->n;
    for (int i = 0; i < bl->n; i++) {
        const Json *o = &bl->items[i];
        CaseBatch *b = &c->batch[i];
        if (o->type != JSON_OBJECT) {
            dflash_set_error("%s: batches[%d]: expected an object, got %s", path, i, json_describe(o, got, sizeof got));
            goto done;
        }
        int rows = -1, S = -1, rows2, N = -1;
        if (case_matrix(o, path, i, "input_ids", 'i', V - 1, &rows, &S, &b->ids) != 0) goto done;
        rows2 = rows;
        if (case_matrix(o, path, i, "anchors", 'a', S - 1, &rows2, &N, &b->anchors) != 0) goto done;
        if (N > CASE_MAX_ANCHORS) {
            dflash_set_error("%s: batches[%d].anchors: %d per row: expected at most %d (the --anchors limit)", path, i,
                             N, CASE_MAX_ANCHORS);
            goto done;
        }
        b->b = rows, b->S = S, b->N = N;
        b->mask = malloc(sizeof(int) * (size_t)rows * (size_t)S);
        b->keep = malloc(sizeof(int) * (size_t)rows * (size_t)N);
        if (!b->mask || !b->keep) { dflash_set_error("out of memory (%s)", path); goto done; }
        for (size_t k = 0; k < (size_t)rows * (size_t)S; k++) b->mask[k] = 1;
        for (size_t k = 0; k < (size_t)rows * (size_t)N; k++) b->keep[k] = 1;
        const Json *lm = json_get(o, "loss_mask"), *kp = json_get(o, "keep");
        int r = rows, cS = S, cN = N;
        if (lm && lm->type != JSON_NULL) {
            free(b->mask), b->mask = NULL;
            if (case_matrix(o, path, i, "loss_mask", 'm', 1, &r, &cS, &b->mask) != 0) goto done;
        }
        if (kp && kp->type != JSON_NULL) {
            free(b->keep), b->keep = NULL;
            if (case_matrix(o, path, i, "keep", 'k', 1, &r, &cN, &b->keep) != 0) goto done;
        }
        /* the kept anchors sorted (SpecForge sorts them); a slot keep drops
         * is ignored, whatever its position (train_draw_anchors and so the
         * trace write 0 there: a traced batch reads back) */
        for (int q = 0; q < rows; q++)
            for (int n = 0, last = -1; n < N; n++) {
                if (!b->keep[q * N + n]) continue;
                if (last >= 0 && b->anchors[q * N + n] < b->anchors[q * N + last]) {
                    dflash_set_error("%s: batches[%d].anchors[%d]: expected the kept positions sorted, got %d after %d",
                                     path, i, q, b->anchors[q * N + n], b->anchors[q * N + last]);
                    goto done;
                }
                last = n;
            }
    }
    rc = 0;
done:
    json_free(&root);
    if (rc != 0) case_free(c);
    return rc;
}


/* The positions a batch trains on: block position k = 1..B-1 of a kept
 * anchor n, inside the sequence, with loss mask 1 (train/train.c, batch_setup's
 * binary weight). 0: the step would train nothing. */
long batch_trained_positions(int b, int S, int N, int B, const int *mask, const int *anchors, const int *keep) {
    long n_pos = 0;
    for (int r = 0; r < b; r++)
        for (int n = 0; n < N; n++) {
            int a = anchors[(size_t)r * N + n];
            if (!keep[(size_t)r * N + n]) continue;
            for (int k = 1; k < B && a + k < S; k++) n_pos += mask[(size_t)r * S + a + k] != 0;
        }
    return n_pos;
}

/* ===========================================================================
 * 4. One step's batch
 * ======================================================================== */



void drawer_free(Drawer *d) {
    free(d->ids);
    free(d->mask);
    free(d->anchors);
    free(d->keep);
    free(d->order);
    free(d->rows);
    free(d->feat);
    free(d->have);
    free(d->batch_feat);
    memset(d, 0, sizeof *d);
}

int drawer_init(Drawer *d, int b, int S, int N, int B, int n_seqs) {
    memset(d, 0, sizeof *d);
    d->b = b, d->S = S, d->N = N, d->B = B;
    size_t bs = (size_t)b * (size_t)S, bn = (size_t)b * (size_t)N;
    d->ids = malloc(sizeof(int) * bs);
    d->mask = malloc(sizeof(int) * bs);
    d->anchors = malloc(sizeof(int) * bn);
    d->keep = malloc(sizeof(int) * bn);
    d->order = malloc(sizeof(int) * (size_t)(n_seqs > 0 ? n_seqs : 1));
    d->rows = malloc(sizeof(int) * (size_t)b);
    d->cursor = n_seqs;  /* shuffle before the first draw */
    if (!d->ids || !d->mask || !d->anchors || !d->keep || !d->order || !d->rows) {
        drawer_free(d);
        dflash_set_error("out of memory (a batch of %d x %d)", b, S);
        return -1;
    }
    return 0;
}

/* The next b sequences of this epoch's order (a fresh Fisher-Yates shuffle
 * of all sequences at each epoch's start), cut to S or padded with pad_id at
 * loss mask 0; then the batch's anchor slot count Nb = train_anchor_count
 * (SpecForge: min(num_anchors, max candidate count - 1)) and per sequence
 * train_draw_anchors(Nb) from the one anchor PRNG, in batch order. */
static void drawer_shuffle(Drawer *d, int n, uint64_t *data_rng) {
    d->epoch_rng = *data_rng;
    for (int i = 0; i < n; i++) d->order[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = cli_rng_below(data_rng, i + 1), t = d->order[i];
        d->order[i] = d->order[j];
        d->order[j] = t;
    }
}

int drawer_next(Drawer *d, const Seqs *s, uint64_t *data_rng, uint64_t *anchor_rng, int pad_id, TrainBatch *tb) {
    int S = d->S;
    for (int r = 0; r < d->b; r++) {
        if (d->cursor >= s->n) {
            drawer_shuffle(d, s->n, data_rng);
            d->cursor = 0;
        }
        int q = d->order[d->cursor++];
        d->rows[r] = q;
        int n = s->len[q] < S ? s->len[q] : S;
        int *ids = d->ids + (size_t)r * S, *mask = d->mask + (size_t)r * S;
        memcpy(ids, s->ids + s->off[q], sizeof(int) * (size_t)n);
        memcpy(mask, s->mask + s->off[q], sizeof(int) * (size_t)n);
        for (int k = n; k < S; k++) ids[k] = pad_id, mask[k] = 0;
    }
    int Nb = train_anchor_count(d->mask, d->b, S, d->B, d->N);
    if (Nb < 1) { dflash_set_error("train: a batch with no valid anchor (data_check should have refused it)"); return -1; }
    for (int r = 0; r < d->b; r++)
        if (train_draw_anchors(anchor_rng, d->mask + (size_t)r * S, S, d->B, Nb, d->anchors + (size_t)r * Nb,
                               d->keep + (size_t)r * Nb) < 0)
            return -1;
    tb->b = d->b, tb->S = S, tb->N = Nb, tb->B = d->B;
    tb->input_ids = d->ids;
    tb->loss_mask = d->mask;
    tb->anchors = d->anchors;
    tb->keep = d->keep;
    tb->target_hidden = NULL;
    return 0;
}

/* A checkpoint's position (train/train_cli.c, --resume): this epoch's order
 * redrawn from epoch_rng, the data PRNG as the epoch began, which must come
 * to data_rng, the checkpoint's PRNG after the shuffle (or cursor == n_seqs:
 * the next draw shuffles from data_rng). -1 with dflash_errmsg when the
 * numbers do not fit these n_seqs sequences. */
int drawer_resume(Drawer *d, int n_seqs, int cursor, uint64_t epoch_rng, uint64_t data_rng) {
    if (cursor < 0 || cursor > n_seqs) {
        dflash_set_error("the checkpoint's data position %d is outside the %d sequences (another data set?)", cursor,
                         n_seqs);
        return -1;
    }
    d->epoch_rng = epoch_rng;
    d->cursor = cursor;
    if (cursor == n_seqs) return 0;
    uint64_t g = epoch_rng;
    drawer_shuffle(d, n_seqs, &g);
    if (g != data_rng) {
        dflash_set_error("the checkpoint's data order does not redraw from its PRNG state (another data set, or an "
                         "edited trainer_state.json)");
        return -1;
    }
    return 0;
}

/* Keep each sequence's context features (drawer_init's d->feat), when they
 * fit in DRAWER_CACHE_MAX bytes. */
void drawer_cache_init(Drawer *d, const Model *draft, int n_seqs) {
    d->kD = (size_t)draft->cfg.n_target_layer_ids * (size_t)draft->cfg.hidden_size;
    size_t per = (size_t)d->S * d->kD * sizeof(real);
    if (n_seqs <= 0 || per == 0 || (size_t)n_seqs > DRAWER_CACHE_MAX / per) return;
    d->feat = malloc(per * (size_t)n_seqs);
    d->have = calloc((size_t)n_seqs, 1);
    d->batch_feat = malloc(per * (size_t)d->b);
    if (!d->feat || !d->have || !d->batch_feat) {  /* not kept: train_step runs the target */
        free(d->feat), free(d->have), free(d->batch_feat);
        d->feat = d->batch_feat = NULL, d->have = NULL;
    }
}

/* The batch's features from the kept ones, computing those not kept yet
 * exactly as train_step would (target_forward over the row's S ids,
 * train_context_features). */
int drawer_features(Drawer *d, const Model *draft, const Model *target, TrainBatch *tb) {
    if (!d->feat) return 0;
    const Config *tc = &target->cfg;
    int S = d->S, rc = -1;
    size_t per = (size_t)S * d->kD;
    KVCache cache = {0};
    TargetRun tr = {0};
    for (int r = 0; r < d->b; r++) {
        int q = d->rows[r];
        if (!d->have[q]) {
            if (!cache.key && (cache_init(&cache, tc, S) != 0 || target_run_init(&tr, tc, S, S) != 0)) goto done;
            cache_crop(&cache, 0);  /* a hybrid target's Gated DeltaNet states back to zero too */
            target_forward(target, &cache, &tr, d->ids + (size_t)r * S, S, S - 1, NULL);
            train_context_features(d->feat + (size_t)q * per, &tr, target, draft, S);
            d->have[q] = 1;
        }
        memcpy(d->batch_feat + (size_t)r * per, d->feat + (size_t)q * per, sizeof(real) * per);
    }
    tb->target_hidden = d->batch_feat;
    rc = 0;
done:
    cache_free(&cache);
    target_run_free(&tr);
    return rc;
}


/* One sequence as a --data line: the ids of loss mask 0 before a "|"
 * (when the first id has mask 0), then the rest. */
void seq_write(FILE *f, const Seqs *s, int q) {
    const int *ids = s->ids + s->off[q], *m = s->mask + s->off[q];
    int bar = s->len[q] > 0 && !m[0];
    for (int i = 0; i < s->len[q]; i++) {
        if (bar && m[i]) { fputs(i ? " |" : "|", f); bar = 0; }
        fprintf(f, "%s%d", i ? " " : "", ids[i]);
    }
    fputc('\n', f);
}

