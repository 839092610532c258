/* explorer/embed.c - the explorer's page (web/) as C arrays, at build time.
 *
 *   explorer/embed PAGE.html OUT.c NAME
 *
 * Reads PAGE.html line by line and writes OUT.c defining
 *   const unsigned char NAME_head[], NAME_tail[];   (each ends in a 0 byte)
 *   const size_t NAME_head_len, NAME_tail_len;       (without that 0)
 * which `dflash explore` writes around the trace's data. In PAGE.html:
 *   - a line `<link rel="stylesheet" href="F">` becomes `<style>`, the
 *     text of F (beside PAGE.html), `</style>`;
 *   - a line `<script src="F"></script>` becomes `<script>`, the text of F,
 *     `</script>`;
 *   - the one line `@TRACE_DATA@` splits the page: what comes before it is
 *     NAME_head, what comes after it is NAME_tail;
 *   - every other line is copied as it is.
 * So the page stays real HTML, CSS and JavaScript files that tools can read
 * (`node --check explorer/explorer.js`), and the written page is one file with
 * nothing to load. F must be a plain file name; an inlined file that holds
 * `</style` or `</script` (which would end its element early) is refused.
 * OUT.c is written beside and renamed into place (formats/files.c's OutFile); the
 * files are read with formats/files.c's reader, the one ./dflash uses.
 *
 * C11 and libc only, linked with formats/files.c (llama.cpp's server embeds its web UI the same way).
 */
#include "dflash.h"
#include "formats/files.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("embed: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    out_cleanup_on_signal();  /* the partial OUT.c, if any */
    exit(2);
}

/* a growing byte buffer */
typedef struct {
    unsigned char *b;
    size_t n, cap;
} Buf;

static void put(Buf *o, const void *p, size_t n) {
    if (o->n + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 4096;
        while (cap < o->n + n + 1) cap *= 2;
        unsigned char *b = realloc(o->b, cap);
        if (!b) die("out of memory");
        o->b = b;
        o->cap = cap;
    }
    memcpy(o->b + o->n, p, n);
    o->n += n;
}

static void puts_buf(Buf *o, const char *s) { put(o, s, strlen(s)); }

static Buf read_file(const char *path) {
    Buf o = {0};
    char *text;
    if (file_read_all(path, &text, &o.n) != 0) die("%s", dflash_errmsg);
    o.b = (unsigned char *)text;
    o.cap = o.n + 1;
    if (strlen(text) != o.n) die("%s: holds a 0 byte", path);
    return o;
}

/* does s hold needle, ignoring ASCII case? */
static int has_ci(const char *s, const char *needle) {
    size_t m = strlen(needle);
    for (; *s; s++) {
        size_t k = 0;
        while (k < m && s[k] && tolower((unsigned char)s[k]) == tolower((unsigned char)needle[k])) k++;
        if (k == m) return 1;
    }
    return 0;
}

/* the file F of a line "PRE" F "POST", or NULL when the line is not one */
static char *between(const char *line, const char *pre, const char *post) {
    size_t n = strlen(line), a = strlen(pre), b = strlen(post);
    if (n <= a + b || strncmp(line, pre, a) != 0 || strcmp(line + n - b, post) != 0) return NULL;
    size_t fl = n - a - b;
    char *f = malloc(fl + 1);
    if (!f) die("out of memory");
    memcpy(f, line + a, fl);
    f[fl] = '\0';
    return f;
}

/* inline DIR/FILE between OPEN and CLOSE */
static void inline_file(Buf *o, const char *dir, const char *file, const char *open, const char *close,
                        const char *closer) {
    if (strchr(file, '/') || strchr(file, '"') || file[0] == '.')
        die("\"%s\": only a plain file name beside the page is inlined", file);
    char *path = *dir ? path_join(dir, file) : strdup(file);
    if (!path) die("out of memory");
    Buf in = read_file(path);
    if (has_ci((const char *)in.b, closer)) die("%s: holds \"%s\", which would end the element early", path, closer);
    puts_buf(o, open);
    put(o, in.b, in.n);
    if (in.n && in.b[in.n - 1] != '\n') puts_buf(o, "\n");
    puts_buf(o, close);
    free(in.b);
    free(path);
}

static void put_array(FILE *f, const char *name, const char *part, const Buf *b) {
    fprintf(f, "const unsigned char %s_%s[] = {\n", name, part);
    for (size_t k = 0; k < b->n; k++) fprintf(f, "%u,%s", b->b[k], k % 24 == 23 ? "\n" : "");
    fprintf(f, "0};\nconst size_t %s_%s_len = %zu;\n", name, part, b->n);
}

int main(int argc, char **argv) {
    if (argc != 4) die("usage: embed PAGE.html OUT.c NAME");
    const char *page = argv[1], *out = argv[2], *name = argv[3];
    for (const char *p = name; *p; p++)
        if (!(isalnum((unsigned char)*p) || *p == '_')) die("NAME \"%s\" is not a C identifier", name);

    /* the page's directory, where its parts are */
    char *dir = malloc(strlen(page) + 1);
    if (!dir) die("out of memory");
    strcpy(dir, page);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    else dir[0] = '\0';

    Buf html = read_file(page), part[2] = {{0}};
    int at = 0, markers = 0;
    char *line = (char *)html.b;
    while (*line) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        char *css = between(line, "<link rel=\"stylesheet\" href=\"", "\">");
        char *js = between(line, "<script src=\"", "\"></script>");
        if (strcmp(line, "@TRACE_DATA@") == 0) {
            markers++;
            at = 1;
        } else if (css) {
            inline_file(&part[at], dir, css, "<style>\n", "</style>\n", "</style");
        } else if (js) {
            inline_file(&part[at], dir, js, "<script>\n", "</script>\n", "</script");
        } else {
            puts_buf(&part[at], line);
            puts_buf(&part[at], "\n");
        }
        free(css);
        free(js);
        if (!nl) break;
        line = nl + 1;
    }
    if (markers != 1) die("%s: needs exactly one line @TRACE_DATA@ (found %d)", page, markers);

    OutFile *o = out_open(out, "embed");
    if (!o) die("%s", dflash_errmsg);
    FILE *f = out_stream(o);
    fprintf(f, "/* generated by explorer/embed from %s: do not edit (edit web/, then make) */\n", page);
    fputs("#include <stddef.h>\n", f);
    put_array(f, name, "head", &part[0]);
    put_array(f, name, "tail", &part[1]);
    if (out_commit(o) != 0) die("%s", dflash_errmsg);
    free(dir);
    free(html.b);
    free(part[0].b);
    free(part[1].b);
    return 0;
}
