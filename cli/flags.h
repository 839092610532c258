/* cli/flags.h - THE flag table every subcommand parses its arguments with
 * (cli/flags.c).
 *
 * A subcommand describes each flag once: its name, its kind, the field of
 * the subcommand's argument struct it fills, and its range. flags_parse
 * reads argv against that table, and tests/test_flags.c checks each table
 * against the subcommand's --help (every flag listed, nothing listed that
 * the table lacks, ranges and choices as the table has them), so a flag is
 * added in one place.
 *
 *   typedef struct { const char *out; long steps; double lr; int causal; } Args;
 *   static const Flag FLAGS[] = {
 *       {.name = "--out", .kind = FLAG_STRING, .field = offsetof(Args, out)},
 *       {.name = "--steps", .kind = FLAG_INT, .field = offsetof(Args, steps), .lo = 1, .hi = 100000000},
 *       {.name = "--lr", .kind = FLAG_REAL, .field = offsetof(Args, lr), .lo = 0, .open = FLAG_OPEN},
 *       {.name = "--block-attention", .kind = FLAG_CHOICE, .field = offsetof(Args, causal),
 *        .choices = "bidirectional|causal"},
 *       FLAG_TABLE_END};
 *   int rc = flags_parse(FLAGS, argc, argv, &a, "dflash train", NULL, 0, NULL);  (0 run, 1 --help, -1 bad)
 *
 * Values: "--flag VALUE" (a VALUE that looks like a flag, "--x", is refused
 * as a missing value) and, for flags with a value, "--flag=VALUE". Messages
 * (dflash_errmsg) are the ones every subcommand gives:
 *   --steps: expected an integer in 1..100000000, got "x"
 *   --lr: expected a finite number > 0, got "0"
 *   --beta2: expected a number in (0, 1), got "1"
 *   --schedule: expected cosine or constant, got "linear"
 *   --out: missing value (the next argument, "--data", is a flag)
 *   unknown flag "--bogus" (see dflash train --help)
 */
#ifndef DFLASH_FLAGS_H
#define DFLASH_FLAGS_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    FLAG_END = 0,  /* the table's last entry */
    FLAG_STRING,   /* const char *: the value as given */
    FLAG_STRINGS,  /* const char *[max], int count: repeatable */
    FLAG_LIST,     /* const char *[max], int count: every argument up to the
                      next flag ("--data a.txt b.txt"); repeatable */
    FLAG_INT,      /* long: an integer in lo..hi (digits, an optional '-') */
    FLAG_INTS,     /* int[max], int count: repeatable integers in lo..hi */
    FLAG_REAL,     /* double: a finite number >= lo (> lo with FLAG_OPEN;
                      lo < x < hi with FLAG_OPEN_BOTH) */
    FLAG_U64,      /* uint64_t: an integer in 0..2^64-1 (digits only) */
    FLAG_SWITCH,   /* int: set to 1, no value */
    FLAG_CHOICE    /* int: the index of the value in choices "a|b|c" */
} FlagKind;

#define FLAG_OPEN 1       /* FLAG_REAL: strictly above lo */
#define FLAG_OPEN_BOTH 2  /* FLAG_REAL: strictly between lo and hi */

typedef struct {
    const char *name;     /* "--steps" */
    const char *alias;    /* another name for it ("-v"), or NULL */
    FlagKind kind;
    size_t field;         /* offsetof(Args, member) */
    double lo, hi;        /* FLAG_INT(S): the range; FLAG_REAL: lo (and hi) */
    int open;             /* FLAG_REAL: FLAG_OPEN, FLAG_OPEN_BOTH */
    const char *choices;  /* FLAG_CHOICE: "cosine|constant" */
    size_t count;         /* FLAG_STRINGS, FLAG_LIST, FLAG_INTS: offsetof the int count */
    int max;              /* FLAG_STRINGS, FLAG_LIST, FLAG_INTS: at most this many */
} Flag;

#define FLAG_TABLE_END {.name = NULL, .kind = FLAG_END}

/* Parse argv[1..argc-1] into args by the table. cmd names the subcommand in
 * the unknown-flag message ("dflash train": "(see dflash train --help)";
 * NULL: "(see --help)"). positional: where bare arguments go (NULL: each is
 * refused, "unexpected argument"), *n_positional counting them up to
 * max_positional. Returns 0, 1 for -h / --help, -1 with dflash_errmsg.
 * Fields the command line does not name keep the values args had. */
int flags_parse(const Flag *table, int argc, char **argv, void *args, const char *cmd, const char **positional,
                int max_positional, int *n_positional);

/* One value checked as the table checks it (for values that come from
 * elsewhere, or the items of a list); the same messages. */
int flags_int(const char *flag, const char *s, long lo, long hi, long *out);
int flags_real(const char *flag, const char *s, double lo, int open, double *out);
int flags_real_in(const char *flag, const char *s, double lo, double hi, double *out); /* lo < x < hi */
int flags_u64(const char *flag, const char *s, uint64_t *out);

/* The entry of the table named name ("--steps", or its alias), or NULL. */
const Flag *flags_find(const Flag *table, const char *name);

/* The tables, one per subcommand: MAIN_FLAGS (cli/main.c), DIFF_FLAGS
 * (cli/diff.c), TRAIN_FLAGS (train/train_cli.c), TRAIN_TARGET_FLAGS
 * (train/train_target.c), EVAL_FLAGS (eval/eval.c), TOKENIZE_FLAGS and
 * TRAIN_TOKENIZER_FLAGS (tokenizer/tokenize.c), FIGURES_FLAGS, EXPLORE_FLAGS,
 * GGUF_FLAGS; a new subcommand adds its own and a line to
 * tests/test_flags.c. */
#endif /* DFLASH_FLAGS_H */
