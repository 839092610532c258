/* tokenizer/tokenize.h - `dflash tokenize` and `dflash train-tokenizer`
 * (tokenizer/tokenize.c), over tokenizer/tokenizer.c.
 *
 *   dflash tokenize (--tokenizer FILE | --weights DIR | --target DIR) [--no-special] (--file F | TEXT)
 *   dflash tokenize (--tokenizer FILE | ...) --decode I,J,...
 *   dflash train-tokenizer --vocab-size N --out FILE [--special TOKEN]... CORPUS...
 *
 * Each returns the exit status: 0, or 2 after one line on stderr.
 */
#ifndef DFLASH_TOKENIZE_H
#define DFLASH_TOKENIZE_H

int tokenize_main(int argc, char **argv);
int train_tokenizer_main(int argc, char **argv);

#endif /* DFLASH_TOKENIZE_H */
