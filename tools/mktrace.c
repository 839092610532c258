/* tools/mktrace.c - TRACE.md from the trace-name table, and the check that
 * the table, TRACE.md and the names a run emits agree.
 *
 *   mktrace md TEMPLATE              print TRACE.md: TEMPLATE with the line
 *                                    "@TRACE_NAMES@" replaced by the table
 *   mktrace check TRACE_DIR...       every name in each DIR/trace.jsonl is
 *                                    matched by exactly one table row, with
 *                                    the row's dtype and number of axes;
 *                                    every table row is matched by some name;
 *                                    within each call the names come in the
 *                                    table's data-flow order (place_of)
 *
 * The table is dflash_trace_names (formats/tracenames.c); this file uses the same
 * matcher (trace_name_matches) as the tracer.
 * `make trace-md` writes TRACE.md; `make trace-md-check` (part of
 * `make test` and CI) regenerates it and runs the check on three traced
 * runs. Exit status: 0 agree, 1 disagree, 2 bad input. */
#include "dflash.h"
#include "formats/files.h"
#include "formats/json.h"
#include "formats/tracenames.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *kind_dtype(TraceKind k) { return k == TRACE_IDS ? "int64" : "float32"; }

/* The phase a pattern's tensors are filed under in trace.jsonl. */
static const char *pattern_phase(const char *p) {
    if (strncmp(p, "P.", 2) == 0) return "prefill / verify";
    if (strncmp(p, "prefill.", 8) == 0 || strcmp(p, "input_ids") == 0) return "prefill";
    if (strncmp(p, "draft", 5) == 0) return "draft";
    if (strncmp(p, "verify", 6) == 0) return "verify";
    if (strncmp(p, "train", 5) == 0) return "train";
    return "final";
}

static int n_axes(const char *shape) {
    if (!*shape) return 0;
    int n = 1;
    for (const char *s = shape; *s; s++) n += *s == ',';
    return n;
}

/* a table as Markdown: one row per pattern, in the table's order */
static void print_table(FILE *f, const TraceName *names, int n_names) {
    fprintf(f, "| # | name | shape | dtype | phase | meaning | C function |\n|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n_names; i++) {
        const TraceName *t = &names[i];
        fprintf(f, "| %d | `%s` | %s%s%s | %s | %s | ", i + 1, t->pattern, *t->shape ? "[" : "`[]` (0-d)",
                t->shape, *t->shape ? "]" : "", kind_dtype(t->kind), pattern_phase(t->pattern));
        for (const char *m = t->meaning; *m; m++) {  /* Markdown table cells: escape | */
            if (*m == '|') fputc('\\', f);
            fputc(*m, f);
        }
        fprintf(f, " | `%s` |\n", t->function);
    }
}

static int cmd_md(const char *template_path) {
    size_t len;
    char *t;
    if (file_read_all(template_path, &t, &len) != 0) { fprintf(stderr, "mktrace: %s\n", dflash_errmsg); return 2; }
    int found = 0;
    for (char *line = t; *line;) {
        char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) : strlen(line);
        if (n == 13 && strncmp(line, "@TRACE_NAMES@", 13) == 0) {
            print_table(stdout, dflash_trace_names, dflash_n_trace_names);
            found++;
        } else if (n == 13 && strncmp(line, "@TRAIN_NAMES@", 13) == 0) {  /* train/train.c's names */
            print_table(stdout, dflash_train_trace_names, dflash_n_train_trace_names);
        } else if (n == 14 && strncmp(line, "@HYBRID_NAMES@", 14) == 0) {  /* a hybrid target's rows */
            print_table(stdout, dflash_hybrid_trace_names, dflash_n_hybrid_trace_names);
        } else if (n == 16 && strncmp(line, "@LM_TRAIN_NAMES@", 16) == 0) {  /* train/train.c's lm_step names */
            print_table(stdout, dflash_lm_trace_names, dflash_n_lm_trace_names);
        } else {
            fwrite(line, 1, n, stdout);
            if (nl) fputc('\n', stdout);
        }
        line += n + (nl != NULL);
    }
    free(t);
    if (found != 1) {
        fprintf(stderr, "mktrace: %s: expected exactly one line \"@TRACE_NAMES@\", found %d\n", template_path, found);
        return 2;
    }
    return 0;
}

/* L = the number of distinct target layers the trace names (prefill.layers.{l}.*) */
static int count_layers(const Json *lines, int n) {
    int L = 0;
    for (int i = 0; i < n; i++) {
        const Json *nm = json_get(&lines[i], "name");
        int l;
        if (nm && nm->type == JSON_STRING && sscanf(nm->string, "prefill.layers.%d.", &l) == 1 && l + 1 > L)
            L = l + 1;
    }
    return L;
}

/* The data-flow order, derived from the table: within one call (the names
 * sharing a first component, "prefill", "draft1", "verify1", ...) a name's
 * place is (stage, layer, row): stage 0 for the rows the table lists before
 * that model's layer rows, 1 for a layer's rows (and hidden_states.{l+1},
 * which comes right after layer l), 2 for the rows after them. The places
 * must strictly increase through a call: each layer's tensors in table
 * order, a layer's output right after it, no name twice. */
typedef struct { int stage, layer, row; } Place;

static int is_draft_row(int r) { return strncmp(dflash_trace_names[r].pattern, "draft", 5) == 0; }
static int is_layer_row(int r) { return strstr(dflash_trace_names[r].pattern, ".layers.{l}") != NULL; }

static Place place_of(const char *name, int row) {
    Place p = {0, -1, row};
    const char *hs = strstr(name, ".hidden_states.");
    const char *ly = strstr(name, ".layers.");
    if (hs) {
        int i = atoi(hs + 15);
        if (i > 0) { p.stage = 1; p.layer = i - 1; p.row = 1 << 20; }  /* after layer i-1's rows */
        return p;
    }
    if (ly) {
        p.stage = 1;
        p.layer = atoi(ly + 8);
        return p;
    }
    for (int r = row + 1; r < dflash_n_trace_names; r++)
        if (is_layer_row(r) && is_draft_row(r) == is_draft_row(row)) return p;  /* before the layers */
    p.stage = 2;
    return p;
}

static int place_less(Place a, Place b) {
    if (a.stage != b.stage) return a.stage < b.stage;
    if (a.layer != b.layer) return a.layer < b.layer;
    return a.row < b.row;
}

static int cmd_check(int ndirs, char **dirs) {
    int *used = calloc((size_t)dflash_n_trace_names, sizeof(int));
    int bad = 0, total = 0;
    if (!used) return 2;
    for (int di = 0; di < ndirs; di++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/trace.jsonl", dirs[di]);
        size_t len;
        char *text;
        if (file_read_all(path, &text, &len) != 0) {
            fprintf(stderr, "mktrace: %s\n", dflash_errmsg);
            free(used);
            return 2;
        }
        /* one JSON object per line */
        int cap = 1024, n = 0;
        Json *lines = malloc(sizeof(Json) * (size_t)cap);
        for (char *line = text; lines && *line;) {
            char *nl = strchr(line, '\n');
            size_t ln = nl ? (size_t)(nl - line) : strlen(line);
            if (n == cap) {
                Json *nb = realloc(lines, sizeof(Json) * (size_t)(cap *= 2));
                if (!nb) { free(lines); lines = NULL; break; }
                lines = nb;
            }
            if (json_parse(line, ln, path, &lines[n]) != 0) {
                fprintf(stderr, "mktrace: %s\n", dflash_errmsg);
                for (int i = 0; i < n; i++) json_free(&lines[i]);
                free(lines); free(text); free(used);
                return 2;
            }
            n++;
            line += ln + (nl != NULL);
        }
        free(text);
        if (!lines) { free(used); return 2; }
        int L = count_layers(lines, n);
        char call[64] = "";
        Place last = {-1, -1, -1};
        const char *last_name = "";
        for (int i = 0; i < n; i++) {
            const Json *nm = json_get(&lines[i], "name"), *dt = json_get(&lines[i], "dtype");
            const Json *sh = json_get(&lines[i], "shape");
            if (!nm || nm->type != JSON_STRING || !dt || dt->type != JSON_STRING || !sh || sh->type != JSON_ARRAY) {
                fprintf(stderr, "mktrace: %s line %d: expected name, dtype and shape\n", path, i + 1);
                bad = 1;
                continue;
            }
            int matches = 0, row = -1;
            for (int r = 0; r < dflash_n_trace_names; r++)
                if (trace_name_matches(dflash_trace_names[r].pattern, nm->string, L)) { matches++; row = r; }
            total++;
            if (matches != 1) {
                printf("%s: %s is matched by %d table rows (expected exactly 1)\n", dirs[di], nm->string, matches);
                bad = 1;
                continue;
            }
            used[row]++;
            const TraceName *t = &dflash_trace_names[row];
            const char *dot = strchr(nm->string, '.');
            size_t cl = dot ? (size_t)(dot - nm->string) : 0;
            if (cl >= sizeof call) cl = sizeof call - 1;
            Place pl = place_of(nm->string, row);
            if (strlen(call) != cl || strncmp(call, nm->string, cl) != 0) {  /* a new call */
                memcpy(call, nm->string, cl);
                call[cl] = 0;
            } else if (!place_less(last, pl)) {
                printf("%s: %s comes after %s, against the table's data-flow order\n", dirs[di], nm->string,
                       last_name);
                bad = 1;
            }
            last = pl;
            last_name = nm->string;
            /* reals are float32, or float64 in the double build */
            int dtype_ok = t->kind == TRACE_IDS ? strcmp(dt->string, "int64") == 0
                                                : strcmp(dt->string, "float32") == 0 ||
                                                      strcmp(dt->string, "float64") == 0;
            if (!dtype_ok) {
                printf("%s: %s has dtype %s, its row `%s` says %s\n", dirs[di], nm->string, dt->string, t->pattern,
                       kind_dtype(t->kind));
                bad = 1;
            }
            if (sh->n != n_axes(t->shape)) {
                printf("%s: %s has %d axes, its row `%s` has shape [%s]\n", dirs[di], nm->string, sh->n, t->pattern,
                       t->shape);
                bad = 1;
            }
        }
        for (int i = 0; i < n; i++) json_free(&lines[i]);
        free(lines);
    }
    for (int r = 0; r < dflash_n_trace_names; r++)
        if (!used[r]) {
            printf("table row `%s` is matched by no name the runs emitted\n", dflash_trace_names[r].pattern);
            bad = 1;
        }
    free(used);
    if (!bad)
        printf("mktrace check: %d names from %d traces, each matched by exactly one of the %d table rows; "
               "every row used\n", total, ndirs, dflash_n_trace_names);
    return bad;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "md") == 0) return cmd_md(argv[2]);
    if (argc >= 3 && strcmp(argv[1], "check") == 0) return cmd_check(argc - 2, argv + 2);
    fprintf(stderr, "usage: mktrace md TEMPLATE > TRACE.md\n       mktrace check TRACE_DIR...\n");
    return 2;
}
